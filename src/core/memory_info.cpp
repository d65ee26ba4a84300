#include "core/memory_info.h"

#include <fstream>
#include <string>

namespace tern {

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return 0;
}

namespace {

int64_t status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field) {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

}  // namespace

int64_t resident_bytes() { return status_kb("VmRSS:"); }

int64_t peak_resident_bytes() { return status_kb("VmHWM:"); }

}  // namespace tern
