#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace tern {
namespace {

TEST(Fp16, ExactValuesRoundTrip) {
  // Every finite half converts to float and back bit-exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = fp16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(f), bits) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16, KnownEncodings) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(float_to_fp16(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(1e-10f), 0x0000);
  // Ties round to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_FLOAT_EQ(fp16_to_float(0x3555), 0.33325195f);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Status, ResultCarriesValueOrError) {
  Result<int> ok = 5;
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, 5);
  Result<int> bad = error(ErrorKind::NotFound, "x");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::NotFound);
  EXPECT_EQ(bad.status().with_context("file").message(), "file: x");
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 20; ++rep)
        pool.parallel_for(n, [&](size_t b, size_t e, int) {
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 20) << "threads " << threads << " n " << n;
    }
  }
}

// Back-to-back jobs of different sizes, each with its own function object at
// the same stack address: a worker still holding the previous job's last claim
// must never run a chunk of the next job before it is published (that chunk
// would then run twice). Counts are per job, checked right after each call.
TEST(ThreadPool, BackToBackJobsRunEachChunkExactlyOnce) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<int> hits(64);
    for (int job = 0; job < 20000; ++job) {
      const size_t n = 1 + static_cast<size_t>(job * 7919) % 64;
      std::fill(hits.begin(), hits.begin() + n, 0);
      const int tag = job;  // captured: each job's function differs
      pool.parallel_for(n, [&hits, tag](size_t b, size_t e, int) {
        for (size_t i = b; i < e; ++i) hits[i] += 1 + (tag & 0);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "threads " << threads << " job " << job << " i " << i;
    }
  }
}

}  // namespace
}  // namespace tern
