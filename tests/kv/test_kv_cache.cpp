#include <gtest/gtest.h>

#include "core/fp16.h"
#include "kv/kv_cache.h"

namespace tern {
namespace {

TEST(ContiguousKvCache, StoresRowsPerLayerSequenceAndPosition) {
  auto kv = make_contiguous_kv_cache({2, 2, 4}, 2, 8);
  ASSERT_TRUE(kv->reserve(SeqId(0), 3).is_ok());
  ASSERT_TRUE(kv->reserve(SeqId(1), 2).is_ok());
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < 2; ++p)
        for (int i = 0; i < 8; ++i) {
          static_cast<float*>(kv->key_row(l, SeqId(s), p))[i] = 1000.0f * l + 100.0f * s + 10.0f * p + i;
          static_cast<float*>(kv->value_row(l, SeqId(s), p))[i] = -(1000.0f * l + 100.0f * s + 10.0f * p + i);
        }
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < 2; ++p)
        for (int i = 0; i < 8; ++i) {
          EXPECT_EQ(static_cast<float*>(kv->key_row(l, SeqId(s), p))[i], 1000.0f * l + 100.0f * s + 10.0f * p + i);
          EXPECT_EQ(static_cast<float*>(kv->value_row(l, SeqId(s), p))[i], -(1000.0f * l + 100.0f * s + 10.0f * p + i));
        }
}

TEST(ContiguousKvCache, PositionsTruncateAndLimits) {
  auto kv = make_contiguous_kv_cache({1, 1, 2}, 1, 4);
  EXPECT_EQ(kv->n_positions(SeqId(0)), 0);
  ASSERT_TRUE(kv->reserve(SeqId(0), 4).is_ok());
  kv->set_n_positions(SeqId(0), 3);
  EXPECT_EQ(kv->n_positions(SeqId(0)), 3);
  kv->truncate(SeqId(0), 1);
  EXPECT_EQ(kv->n_positions(SeqId(0)), 1);
  kv->truncate(SeqId(0), 0);
  EXPECT_EQ(kv->n_positions(SeqId(0)), 0);
  auto s = kv->reserve(SeqId(0), 5);
  EXPECT_EQ(s.kind(), ErrorKind::OutOfRange);
  EXPECT_NE(s.message().find("exceeds"), std::string::npos);
  EXPECT_EQ(kv->reserve(SeqId(1), 1).kind(), ErrorKind::OutOfRange);
  EXPECT_EQ(kv->n_positions(SeqId(7)), 0);
  EXPECT_NE(kv->dump().find("max_positions=4"), std::string::npos);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

TEST(ContiguousKvCache, StoresHalfRowsRoundedToNearest) {
  KvShape shape{1, 2, 4, KvType::F16};
  EXPECT_EQ(shape.row_bytes(), 16u);
  auto kv = make_contiguous_kv_cache(shape, 1, 4);
  ASSERT_TRUE(kv->reserve(SeqId(0), 2).is_ok());
  const float k[8] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, 3.0f, -0.0f, 1000.3f};
  const float v[8] = {0.5f, 0.25f, -1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 1.0f / 3.0f};
  kv->store(0, SeqId(0), 1, k, v);
  const auto* kh = static_cast<const uint16_t*>(kv->key_row(0, SeqId(0), 1));
  const auto* vh = static_cast<const uint16_t*>(kv->value_row(0, SeqId(0), 1));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(kh[i], float_to_fp16(k[i])) << i;
    EXPECT_EQ(vh[i], float_to_fp16(v[i])) << i;
  }
  EXPECT_EQ(fp16_to_float(kh[2]), fp16_to_float(float_to_fp16(0.1f)));
  EXPECT_NE(fp16_to_float(kh[2]), 0.1f);  // really stored as half
}

// max_positions is the user's -c: when the slot's buffers cannot be had
// (here 256 TiB), reserve() says so instead of std::bad_alloc ending the process.
// (Sanitizer allocators abort on such a request by design, so skip there.)
TEST(ContiguousKvCache, ReserveReportsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer allocators abort on impossible sizes";
#endif
  const KvShape shape{32, 8, 128, KvType::F32};  // 4 KiB rows
  auto kv = make_contiguous_kv_cache(shape, 1, INT32_MAX);
  const Status s = kv->reserve(SeqId(0), 16);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.kind(), ErrorKind::OutOfRange);
  EXPECT_NE(s.message().find("out of memory for a KV cache of 2147483647 positions (524288.00 GiB)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(contiguous_kv_bytes(shape, 10), 2u * 32 * 10 * 4096);
  auto small = make_contiguous_kv_cache(shape, 1, 16);
  EXPECT_TRUE(small->reserve(SeqId(0), 16).is_ok());
}

}  // namespace
}  // namespace tern
