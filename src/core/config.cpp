#include "core/config.h"

#include <cstdlib>

namespace tern {
namespace {

std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

const EnvConfig& env_config() {
  static const EnvConfig config = [] {
    EnvConfig c;
    if (std::string v = get("TERN_LOG_LEVEL"); !v.empty()) c.log_level = v;
    c.cpu_level = get("TERN_CPU_LEVEL");
    c.pack_weights = get("TERN_PACK") != "0";
    if (std::string v = get("TERN_FAULT_IO_STEP"); !v.empty()) c.fault_io_step = std::strtoll(v.c_str(), nullptr, 10);
    return c;
  }();
  return config;
}

}  // namespace tern
