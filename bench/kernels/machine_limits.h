// bench/kernels/machine_limits.h — what this machine allows, measured, so that
// kernel results can be read as a fraction of it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace tern::bench {

struct MachineLimits {
  double read_gbs = 0;          // streaming read bandwidth from DRAM (buffer >> caches), all pool threads,
                                // 512-bit loads and software prefetch where the CPU has AVX-512
  double int8_gops = 0;         // vpdpbusd zmm throughput x 64 MACs x 2 ops, all pool threads (0 without AVX-512 VNNI)
  double f32_gflops = 0;        // zmm FMA throughput x 16 lanes x 2 flops (0 without AVX-512)
  double bf16_gflops = 0;       // vdpbf16ps zmm throughput x 32 MACs x 2 flops (0 without AVX-512 BF16)
};

// About two seconds: a 1 GiB read stream and register-only loops on every thread.
MachineLimits measure_machine_limits(ThreadPool& pool);

// Register-only loops (machine_limits_avx512.cpp); each returns a checksum.
// Per iteration: 16 vpdpbusd / 16 vfmadd231ps / 16 vdpbf16ps on zmm registers.
int avx512_vnni_loop(long iters);
// Sums n bytes at p (a multiple of 256) with 512-bit loads and software
// prefetch; returns a checksum. May prefetch (never load) past p + n.
uint64_t avx512_read(const uint8_t* p, size_t n);
float avx512_fma_loop(long iters);
float avx512_bf16_loop(long iters);

}  // namespace tern::bench
