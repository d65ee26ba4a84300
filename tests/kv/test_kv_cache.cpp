#include <gtest/gtest.h>

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
          kv->key_row(l, SeqId(s), p)[i] = 1000.0f * l + 100.0f * s + 10.0f * p + i;
          kv->value_row(l, SeqId(s), p)[i] = -(1000.0f * l + 100.0f * s + 10.0f * p + i);
        }
  for (int l = 0; l < 2; ++l)
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < 2; ++p)
        for (int i = 0; i < 8; ++i) {
          EXPECT_EQ(kv->key_row(l, SeqId(s), p)[i], 1000.0f * l + 100.0f * s + 10.0f * p + i);
          EXPECT_EQ(kv->value_row(l, SeqId(s), p)[i], -(1000.0f * l + 100.0f * s + 10.0f * p + i));
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
