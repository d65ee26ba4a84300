// core/config.h — the environment variables tern reads, parsed once, here.
//
// | variable        | values                                   | effect                                      |
// |-----------------|------------------------------------------|---------------------------------------------|
// | TERN_LOG_LEVEL  | debug, info, warn (default), error, off  | log verbosity                               |
// | TERN_CPU_LEVEL  | scalar, avx2, avx512 (x86); scalar, neon, | caps the kernel level chosen at run time    |
// |                 | dotprod, i8mm (ARM64) (default: best)    |                                             |
// | TERN_PACK       | 0 = off (default on)                     | CPU backend packs matrices into panels      |
// | TERN_FAULT_IO_STEP | N >= 0 (tests; default off)           | the N-th I/O step of atomic files fails as  |
// |                 |                                          | a full disk does (core/atomic_file.h)       |
//
// Library code reads these only through env_config(); an unknown value keeps
// the default (and is reported once by log level warn).
#pragma once

#include <string>

namespace tern {

enum class LogLevel;

struct EnvConfig {
  std::string log_level = "warn";
  std::string cpu_level;  // "" = the best the CPU has
  bool pack_weights = true;
  long long fault_io_step = -1;  // -1: no injected I/O failure
};

// Parsed on first use; the same object for the life of the process.
const EnvConfig& env_config();

}  // namespace tern
