// kernels/peak_loops.h — the architecture's throughput loops behind
// measure_machine_limits (internal to kernels/roofline.cpp).
//
// Each loop keeps enough independent accumulators (more than latency x
// throughput of its unit) that it measures throughput, and returns a value
// derived from them so the work is not optimised away. The functions are in
// x86/peak_loops_x86.cpp, arm/peak_loops_arm.cpp or peak_loops_none.cpp,
// whichever matches the build's architecture; each checks the running CPU
// and returns an empty Loop (or nullptr) for what it lacks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::kernels::peak {

struct Loop {
  double (*fn)(long iters) = nullptr;
  double ops_per_iter = 0;  // flops (or int8 ops: 2 per multiply-add) of one iteration
};

Loop f32_fma();   // f32 fused multiply-add at the widest vector width
Loop int8_dot();  // int8 dot products (AVX-512 VNNI, Arm SDOT)
Loop bf16_dot();  // bf16 dot products (AVX-512 BF16)

// Streaming reads of n bytes (a multiple of 256) as the GEMV kernels read
// weights, with and without software prefetch (it helps on some CPUs and
// costs on others: a Zen 3 streams 43 GB/s without, 37 with): variant i, or
// nullptr past the last. The roofline takes the best of them and plain loads.
using ReadLoop = uint64_t (*)(const uint8_t* p, size_t n);
ReadLoop read_loop(int i);

}  // namespace tern::kernels::peak
