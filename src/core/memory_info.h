// core/memory_info.h — how much memory the machine can still give us, and how much we hold.
//
// MemAvailable from /proc/meminfo: the kernel's estimate of memory that can be
// allocated without swapping (free pages plus reclaimable cache). Used to
// refuse, up front and with a message, KV caches that would otherwise be
// accepted (address space is cheap) and later get the process OOM-killed.
#pragma once

#include <cstdint>

namespace tern {

// Bytes; 0 when unknown (no /proc, or a kernel without the field).
int64_t available_memory_bytes();

// This process's resident set now (VmRSS) and its peak so far (VmHWM); 0 where unavailable.
int64_t resident_bytes();
int64_t peak_resident_bytes();

}  // namespace tern
