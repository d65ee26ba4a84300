// tern/config.h — the typed choices an engine is configured with (public
// API). The library's modules use these same enums; the CLI parses their
// names (cpu, f16, fcfs, recompute, lz4 ...) into them.
#pragma once

#include <cstdint>

namespace tern {

// Which implementation computes the forward pass.
enum class BackendKind { Cpu, Ref };  // SIMD kernels on a thread pool | the scalar reference

// How stored keys and values are encoded (core/kv_format.h): f32, IEEE half,
// int8 or 4-bit codes with a half scale per 32 elements, or FP8 E4M3.
enum class KvType : uint8_t { F32, F16, Q8_0, Q4_0, Fp8 };

// Order between requests (docs/scheduler.md).
enum class SchedulePolicy { Fcfs, Priority, ShortestJobFirst, FairShare };

// What happens to a running request when KV blocks run out.
enum class PreemptionMode { Recompute, Swap };

// Where speculative decoding's proposals come from (none: it is off): prompt
// lookup, a draft model's file, or the model itself re-encoded at low precision.
enum class SpecMethod { None, Ngram, Draft, SelfDraft };

// How swapped-out KV blocks are kept in host memory.
enum class SwapCompression { None, Lz4, Zstd };

}  // namespace tern
