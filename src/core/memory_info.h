// core/memory_info.h — how much memory the machine can still give us.
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

}  // namespace tern
