// core/cpu_name.h — the CPU's model name as the kernel reports it.
#pragma once

#include <string>

namespace tern {

// /proc/cpuinfo's first "model name" value (x86: e.g. "AMD EPYC"); "" where
// there is none (no /proc, or an ARM kernel, which prints no such line).
std::string cpu_model_name();

}  // namespace tern
