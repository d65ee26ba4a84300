// kernels/roofline.h — measured limits of this machine, for benchmarks that
// report how close a run is to what the hardware allows (`tern bench`,
// bench/kernels/bench_matmul).
#pragma once

#include "core/thread_pool.h"

namespace tern::kernels {

struct MachineLimits {
  double read_bw_gbs = 0;       // streaming read from DRAM (1 GiB buffer), all threads; 512-bit (AVX-512)
                                // or 256-bit (AVX2) loads with software prefetch, as the GEMV kernels do
  double peak_gflops_f32 = 0;   // f32 FMA throughput, all threads (2 flops per lane)
  double peak_gops_int8 = 0;    // int8 dot throughput x 2 ops per MAC: vpdpbusd zmm (AVX-512 VNNI),
                                // vpmaddubsw ymm + int16 add (AVX2), SDOT (Arm dotprod); 0 without any
  double peak_gflops_bf16 = 0;  // vdpbf16ps zmm throughput x 32 MACs x 2 flops (0 without AVX-512 BF16)
};

// About two seconds: a read stream over a buffer far larger than the caches
// and register-only loops on every thread (after a short warm-up that lets
// the clocks settle).
MachineLimits measure_machine_limits(ThreadPool& pool);

}  // namespace tern::kernels
