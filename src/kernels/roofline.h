// kernels/roofline.h — measured limits of this machine, for benchmarks that
// report how close a run is to what the hardware allows.
#pragma once

#include "core/thread_pool.h"

namespace tern::kernels {

struct MachineLimits {
  double read_bw_gbs = 0;      // sustained read bandwidth from memory, all threads
  double peak_gflops_f32 = 0;  // f32 FMA throughput, all threads (2 flops per FMA lane)
  double peak_gops_int8 = 0;   // int8 dot-product throughput (VNNI / maddubs), 2 ops per MAC
};

// Takes about a second: streams a buffer several times larger than the
// last-level cache and runs register-only FMA / dot-product loops per thread.
MachineLimits measure_machine_limits(ThreadPool& pool);

}  // namespace tern::kernels
