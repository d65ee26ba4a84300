// core/format_bytes.h — a byte count as text for messages and tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tern {

// "2.00 GiB", "1.50 MiB", "0.5 KiB": binary units, two or one decimals.
inline std::string format_bytes(uint64_t n) {
  char buf[32];
  const double mib = static_cast<double>(n) / (1024.0 * 1024.0);
  if (mib >= 1024.0) std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024.0);
  else if (mib >= 1.0) std::snprintf(buf, sizeof buf, "%.2f MiB", mib);
  else std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024.0);
  return buf;
}

}  // namespace tern
