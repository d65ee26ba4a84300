#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kv/paged_kv_cache.h"

namespace tern {
namespace {

constexpr KvShape kShape{2, 2, 4, KvType::F32};  // 2 layers, rows of 8 elements

// A distinct value for every (layer, seq tag, position, element, K or V).
float key_value(int layer, int tag, int pos, int i) {
  return 1000.0f * layer + 100.0f * tag + pos + 0.01f * i;
}
float val_value(int layer, int tag, int pos, int i) { return -key_value(layer, tag, pos, i) - 0.5f; }

void store_positions(KvCache& kv, SeqId seq, int tag, int32_t begin, int32_t end) {
  const int n = kv.shape().row_elems();
  std::vector<float> k(n), v(n);
  for (int l = 0; l < kv.shape().n_layer; ++l)
    for (int32_t p = begin; p < end; ++p) {
      for (int i = 0; i < n; ++i) {
        k[i] = key_value(l, tag, p, i);
        v[i] = val_value(l, tag, p, i);
      }
      kv.store(l, seq, p, k.data(), v.data());
    }
}

// Checks positions [begin, end) of seq hold tag's F32 values, read through rows().
void expect_positions(KvCache& kv, SeqId seq, int tag, int32_t begin, int32_t end) {
  const int n = kv.shape().row_elems();
  for (int l = 0; l < kv.shape().n_layer; ++l) {
    std::vector<KvRows> runs;
    kv.rows(l, seq, begin, end, runs);
    int32_t next = begin;
    for (const KvRows& r : runs) {
      ASSERT_EQ(r.pos0, next);
      for (int32_t j = 0; j < r.n; ++j)
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(static_cast<const float*>(r.k)[j * n + i], key_value(l, tag, r.pos0 + j, i))
              << "layer " << l << " pos " << r.pos0 + j;
          ASSERT_EQ(static_cast<const float*>(r.v)[j * n + i], val_value(l, tag, r.pos0 + j, i));
        }
      next += r.n;
    }
    ASSERT_EQ(next, end);
  }
}

TEST(PagedKvCache, SizesAndParsing) {
  EXPECT_EQ(paged_kv_block_bytes(kShape, 4), 2u * 2 * 4 * 8 * 4);
  EXPECT_EQ(paged_kv_block_bytes({2, 2, 4, KvType::F16}, 4), 2u * 2 * 4 * 8 * 2);
  EXPECT_EQ(paged_kv_blocks_for_bytes(kShape, 4, 512 * 3 + 511), 3);
  EXPECT_EQ(paged_kv_blocks_for_bytes(kShape, 4, 511), 0);
  EXPECT_EQ(paged_kv_blocks_for_bytes(kShape, 4, 0), 0);
  EXPECT_EQ(parse_swap_compression("none").value(), SwapCompression::None);
  EXPECT_EQ(parse_swap_compression("lz4").value(), SwapCompression::Lz4);
  EXPECT_EQ(parse_swap_compression("zstd").value(), SwapCompression::Zstd);
  EXPECT_EQ(parse_swap_compression("gzip").status().kind(), ErrorKind::InvalidArgument);
}

TEST(PagedKvCache, StoresAndReadsF32RowsThroughBlocks) {
  PagedKvCache kv(kShape, 8, 4, true);
  EXPECT_EQ(kv.block_size(), 4);
  ASSERT_TRUE(kv.reserve(SeqId(0), 10).is_ok());
  ASSERT_TRUE(kv.reserve(SeqId(1), 3).is_ok());
  store_positions(kv, SeqId(1), 1, 0, 3);  // interleaved with seq 0's blocks
  store_positions(kv, SeqId(0), 0, 0, 10);
  kv.set_n_positions(SeqId(0), 10);
  EXPECT_EQ(kv.n_positions(SeqId(0)), 10);
  EXPECT_EQ(kv.n_positions(SeqId(5)), 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(static_cast<float*>(kv.key_row(1, SeqId(0), 9))[i], key_value(1, 0, 9, i));
    EXPECT_EQ(static_cast<float*>(kv.value_row(0, SeqId(1), 2))[i], val_value(0, 1, 2, i));
  }
  // One run per block, in position order.
  std::vector<KvRows> runs;
  kv.rows(1, SeqId(0), 3, 9, runs);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].pos0, 3);
  EXPECT_EQ(runs[0].n, 1);
  EXPECT_EQ(runs[1].pos0, 4);
  EXPECT_EQ(runs[1].n, 4);
  EXPECT_EQ(runs[2].pos0, 8);
  EXPECT_EQ(runs[2].n, 1);
  EXPECT_EQ(runs[1].k, kv.key_row(1, SeqId(0), 4));
  EXPECT_EQ(runs[1].v, kv.value_row(1, SeqId(0), 4));
  runs.clear();
  kv.rows(0, SeqId(0), 5, 5, runs);
  EXPECT_TRUE(runs.empty());
  expect_positions(kv, SeqId(0), 0, 0, 10);
  expect_positions(kv, SeqId(1), 1, 0, 3);
  kv.truncate(SeqId(0), 5);
  EXPECT_EQ(kv.n_positions(SeqId(0)), 5);
  EXPECT_EQ(kv.blocks().block_table(SeqId(0)).size(), 2u);
  expect_positions(kv, SeqId(0), 0, 0, 5);
  kv.truncate(SeqId(0), 0);
  EXPECT_EQ(kv.n_positions(SeqId(0)), 0);
  EXPECT_EQ(kv.blocks().n_blocks_used(), 1);
  EXPECT_NE(kv.dump().find("paged kv cache: f32"), std::string::npos) << kv.dump();
}

TEST(PagedKvCache, StoresF16RowsRoundedToNearest) {
  PagedKvCache kv({1, 2, 4, KvType::F16}, 4, 2, false);
  ASSERT_TRUE(kv.reserve(SeqId(0), 3).is_ok());
  const float k[8] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, 3.0f, -0.0f, 1000.3f};
  const float v[8] = {0.5f, 0.25f, -1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 1.0f / 3.0f};
  kv.store(0, SeqId(0), 2, k, v);
  std::vector<KvRows> runs;
  kv.rows(0, SeqId(0), 2, 3, runs);
  ASSERT_EQ(runs.size(), 1u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(static_cast<const uint16_t*>(runs[0].k)[i], float_to_fp16(k[i]));
    EXPECT_EQ(static_cast<const uint16_t*>(runs[0].v)[i], float_to_fp16(v[i]));
  }
  EXPECT_EQ(static_cast<uint16_t*>(kv.key_row(0, SeqId(0), 2))[1], float_to_fp16(-2.5f));
}

TEST(PagedKvCache, ReserveFailsWhenThePoolIsFull) {
  PagedKvCache kv(kShape, 2, 4, false);
  ASSERT_TRUE(kv.reserve(SeqId(0), 8).is_ok());
  const Status s = kv.reserve(SeqId(1), 1);
  EXPECT_EQ(s.kind(), ErrorKind::OutOfRange);
  EXPECT_EQ(s.message(), "KV cache full: sequence 1 needs 1 more blocks, 0 free");
  EXPECT_EQ(kv.reserve(SeqId(0), 9).kind(), ErrorKind::OutOfRange);
  EXPECT_TRUE(kv.reserve(SeqId(0), 8).is_ok());
  EXPECT_TRUE(kv.blocks().block_table(SeqId(1)).empty());
}

TEST(PagedKvCache, CopyOnWriteAfterForkKeepsTheSourceIntact) {
  PagedKvCache kv(kShape, 8, 4, false);
  ASSERT_TRUE(kv.reserve(SeqId(0), 6).is_ok());
  store_positions(kv, SeqId(0), 0, 0, 6);
  kv.set_n_positions(SeqId(0), 6);
  kv.fork(SeqId(0), SeqId(1));
  EXPECT_EQ(kv.n_positions(SeqId(1)), 6);
  EXPECT_EQ(kv.key_row(0, SeqId(1), 5), kv.key_row(0, SeqId(0), 5));  // shared until written
  expect_positions(kv, SeqId(1), 0, 0, 6);

  ASSERT_TRUE(kv.reserve(SeqId(1), 8).is_ok());  // writes block 1: copied first
  EXPECT_NE(kv.key_row(0, SeqId(1), 5), kv.key_row(0, SeqId(0), 5));
  EXPECT_EQ(kv.key_row(0, SeqId(1), 0), kv.key_row(0, SeqId(0), 0));  // block 0 still shared
  EXPECT_EQ(kv.blocks().stats().n_cow_copies, 1);
  expect_positions(kv, SeqId(1), 0, 0, 6);  // the copy carries the shared positions
  store_positions(kv, SeqId(1), 1, 6, 8);
  kv.set_n_positions(SeqId(1), 8);
  ASSERT_TRUE(kv.reserve(SeqId(0), 8).is_ok());  // now private: no copy
  EXPECT_EQ(kv.blocks().stats().n_cow_copies, 1);
  store_positions(kv, SeqId(0), 0, 6, 8);
  expect_positions(kv, SeqId(0), 0, 0, 8);
  expect_positions(kv, SeqId(1), 1, 6, 8);
  expect_positions(kv, SeqId(1), 0, 0, 6);
  EXPECT_EQ(kv.blocks().check_invariants(), "");
}

TEST(PagedKvCache, CopyOnWriteWithoutAFreeBlockIsAnError) {
  PagedKvCache kv(kShape, 2, 4, false);
  ASSERT_TRUE(kv.reserve(SeqId(0), 2).is_ok());
  kv.set_n_positions(SeqId(0), 2);
  kv.fork(SeqId(0), SeqId(1));
  ASSERT_TRUE(kv.reserve(SeqId(2), 4).is_ok());
  const Status s = kv.reserve(SeqId(1), 3);
  EXPECT_EQ(s.kind(), ErrorKind::OutOfRange);
  EXPECT_NE(s.message().find("copy-on-write"), std::string::npos) << s.message();
}

TEST(PagedKvCache, AttachedPrefixSharesDataAndPositions) {
  PagedKvCache kv(kShape, 8, 4, true);
  std::vector<TokenId> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 50);
  ASSERT_TRUE(kv.reserve(SeqId(0), 10).is_ok());
  store_positions(kv, SeqId(0), 0, 0, 10);
  kv.cache_blocks(SeqId(0), tokens);  // nothing valid yet: nothing cached
  EXPECT_EQ(kv.blocks().n_blocks_cached(), 0);
  kv.set_n_positions(SeqId(0), 10);
  kv.cache_blocks(SeqId(0), tokens);
  EXPECT_EQ(kv.blocks().n_blocks_cached(), 2);

  EXPECT_EQ(kv.attach_cached_prefix(SeqId(1), tokens), 8);
  EXPECT_EQ(kv.n_positions(SeqId(1)), 8);
  EXPECT_EQ(kv.key_row(1, SeqId(1), 7), kv.key_row(1, SeqId(0), 7));
  expect_positions(kv, SeqId(1), 0, 0, 8);
  ASSERT_TRUE(kv.reserve(SeqId(1), 10).is_ok());
  store_positions(kv, SeqId(1), 1, 8, 10);
  expect_positions(kv, SeqId(0), 0, 0, 10);
  expect_positions(kv, SeqId(1), 1, 8, 10);
  EXPECT_EQ(kv.blocks().stats().n_hit_tokens, 8);

  // The cached blocks outlive their sequences and serve a later one.
  kv.truncate(SeqId(0), 0);
  kv.truncate(SeqId(1), 0);
  EXPECT_EQ(kv.blocks().n_blocks_used(), 0);
  EXPECT_EQ(kv.attach_cached_prefix(SeqId(2), tokens, 1), 0);  // another salt
  EXPECT_EQ(kv.attach_cached_prefix(SeqId(3), tokens), 8);
  expect_positions(kv, SeqId(3), 0, 0, 8);
  // Rewriting a cached position copies the block: the cached data stays.
  kv.truncate(SeqId(3), 6);
  ASSERT_TRUE(kv.reserve(SeqId(3), 7).is_ok());
  store_positions(kv, SeqId(3), 3, 6, 7);
  EXPECT_EQ(kv.attach_cached_prefix(SeqId(4), tokens), 8);
  expect_positions(kv, SeqId(4), 0, 0, 8);
  expect_positions(kv, SeqId(3), 3, 6, 7);
  EXPECT_EQ(kv.blocks().check_invariants(), "");
}

// Fills seq with 10 positions: half smooth (compressible), half random bits.
std::vector<std::byte> fill_for_swap(PagedKvCache& kv, SeqId seq, uint64_t seed) {
  std::mt19937_64 rng(seed);
  EXPECT_TRUE(kv.reserve(seq, 10).is_ok());
  const size_t row = kv.shape().row_bytes();
  std::vector<std::byte> expected;
  for (int l = 0; l < kv.shape().n_layer; ++l)
    for (int32_t p = 0; p < 10; ++p)
      for (void* dst : {kv.key_row(l, seq, p), kv.value_row(l, seq, p)}) {
        auto* d = static_cast<std::byte*>(dst);
        for (size_t i = 0; i < row; ++i) d[i] = static_cast<std::byte>(p < 5 ? (i % 8) : rng() & 0xff);
        expected.insert(expected.end(), d, d + row);
      }
  kv.set_n_positions(seq, 10);
  return expected;
}

std::vector<std::byte> read_back(PagedKvCache& kv, SeqId seq) {
  const size_t row = kv.shape().row_bytes();
  std::vector<std::byte> out;
  for (int l = 0; l < kv.shape().n_layer; ++l)
    for (int32_t p = 0; p < kv.n_positions(seq); ++p)
      for (void* src : {kv.key_row(l, seq, p), kv.value_row(l, seq, p)})
        out.insert(out.end(), static_cast<std::byte*>(src), static_cast<std::byte*>(src) + row);
  return out;
}

class PagedKvSwap : public ::testing::TestWithParam<SwapCompression> {};

TEST_P(PagedKvSwap, RoundTripIsBitExact) {
  PagedKvCache kv({2, 2, 8, KvType::F16}, 6, 4, true);
  const auto expected = fill_for_swap(kv, SeqId(0), 7);
  const size_t block_bytes = paged_kv_block_bytes(kv.shape(), 4);
  auto swapped = kv.swap_out(SeqId(0), GetParam());
  ASSERT_TRUE(swapped.is_ok()) << swapped.status().message();
  EXPECT_EQ(kv.blocks().n_blocks_free(), 6);
  EXPECT_EQ(kv.n_positions(SeqId(0)), 0);
  EXPECT_EQ(swapped->n_positions, 10);
  EXPECT_EQ(swapped->compression, GetParam());
  EXPECT_EQ(swapped->raw_bytes, 3 * block_bytes);
  ASSERT_EQ(swapped->block_sizes.size(), 3u);
  if (GetParam() == SwapCompression::None)
    EXPECT_EQ(swapped->data.size(), swapped->raw_bytes);
  else
    EXPECT_LT(swapped->block_sizes[0], block_bytes);  // the smooth block shrinks

  ASSERT_TRUE(kv.reserve(SeqId(1), 5).is_ok());  // the swapped-in blocks land elsewhere
  ASSERT_TRUE(kv.swap_in(SeqId(0), *swapped).is_ok());
  EXPECT_EQ(kv.n_positions(SeqId(0)), 10);
  EXPECT_EQ(read_back(kv, SeqId(0)), expected);
  EXPECT_EQ(kv.blocks().n_blocks_used(), 5);

  // Swapping into a full pool fails and changes nothing.
  auto again = kv.swap_out(SeqId(0), GetParam());
  ASSERT_TRUE(again.is_ok());
  ASSERT_TRUE(kv.reserve(SeqId(2), 16).is_ok());
  const Status s = kv.swap_in(SeqId(0), *again);
  EXPECT_EQ(s.kind(), ErrorKind::OutOfRange);
  EXPECT_TRUE(kv.blocks().block_table(SeqId(0)).empty());
  EXPECT_EQ(kv.blocks().n_blocks_free(), 0);
  kv.truncate(SeqId(2), 0);
  ASSERT_TRUE(kv.swap_in(SeqId(0), *again).is_ok());
  EXPECT_EQ(read_back(kv, SeqId(0)), expected);
  EXPECT_EQ(kv.blocks().check_invariants(), "");
}

TEST_P(PagedKvSwap, CorruptDataIsAnErrorNotACrash) {
  PagedKvCache kv({2, 2, 8, KvType::F32}, 6, 4, false);
  fill_for_swap(kv, SeqId(0), 9);
  auto swapped = kv.swap_out(SeqId(0), GetParam());
  ASSERT_TRUE(swapped.is_ok());
  const SwappedKv good = *swapped;
  std::mt19937_64 rng(3);

  std::vector<SwappedKv> bad;
  {  // a block one byte short
    SwappedKv b = good;
    b.data.erase(b.data.begin() + b.block_sizes[0] - 1);
    b.block_sizes[0] -= 1;
    bad.push_back(b);
  }
  {  // garbage bytes of the right sizes
    SwappedKv b = good;
    for (std::byte& x : b.data) x = static_cast<std::byte>(rng() & 0xff);
    if (GetParam() != SwapCompression::None) bad.push_back(b);
  }
  {  // sizes that do not add up to the data
    SwappedKv b = good;
    b.block_sizes[1] += 5;
    bad.push_back(b);
  }
  {  // fewer blocks than the positions need
    SwappedKv b = good;
    b.n_positions = 13;
    bad.push_back(b);
  }
  {  // wrong raw size
    SwappedKv b = good;
    b.raw_bytes -= 1;
    bad.push_back(b);
  }
  {  // well-formed blocks of half the size (from a cache with 2-position blocks)
    PagedKvCache small(kv.shape(), 6, 2, false);
    fill_for_swap(small, SeqId(0), 9);
    auto half = small.swap_out(SeqId(0), GetParam());
    ASSERT_TRUE(half.is_ok());
    SwappedKv b = *half;
    b.block_sizes.resize(3);
    b.checksums.resize(3);
    b.data.resize(b.block_sizes[0] + b.block_sizes[1] + b.block_sizes[2]);
    b.n_positions = good.n_positions;
    b.raw_bytes = good.raw_bytes;
    bad.push_back(b);
  }
  {  // one flipped bit in the stored bytes (raw bytes would restore silently wrong without the checksum)
    SwappedKv b = good;
    b.data[b.block_sizes[0] + 3] ^= std::byte{0x04};
    bad.push_back(b);
  }
  {  // the checksums missing
    SwappedKv b = good;
    b.checksums.clear();
    bad.push_back(b);
  }
  {  // damaged on the way out (the engine-level fault hook)
    PagedKvCache other(kv.shape(), 6, 4, false);
    fill_for_swap(other, SeqId(0), 9);
    corrupt_swaps_for_testing(true);
    auto damaged = other.swap_out(SeqId(0), GetParam());
    corrupt_swaps_for_testing(false);
    ASSERT_TRUE(damaged.is_ok());
    bad.push_back(*damaged);
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    const Status s = kv.swap_in(SeqId(0), bad[i]);
    EXPECT_EQ(s.kind(), ErrorKind::Internal) << "case " << i;
    EXPECT_NE(s.message().find("corrupt"), std::string::npos) << s.message();
    EXPECT_TRUE(kv.blocks().block_table(SeqId(0)).empty()) << "case " << i;
    EXPECT_EQ(kv.n_positions(SeqId(0)), 0);
    EXPECT_EQ(kv.blocks().n_blocks_free(), 6);
  }
  EXPECT_TRUE(kv.swap_in(SeqId(0), good).is_ok());
  EXPECT_EQ(kv.blocks().check_invariants(), "");
}

std::string compression_test_name(const ::testing::TestParamInfo<SwapCompression>& param) {
  switch (param.param) {
    case SwapCompression::None:
      return "None";
    case SwapCompression::Lz4:
      return "Lz4";
    case SwapCompression::Zstd:
      return "Zstd";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Compression, PagedKvSwap,
                         ::testing::Values(SwapCompression::None, SwapCompression::Lz4,
                                           SwapCompression::Zstd),
                         compression_test_name);

TEST(PagedKvCache, EmptySequenceSwapsToNothing) {
  PagedKvCache kv(kShape, 2, 4, false);
  ASSERT_TRUE(kv.reserve(SeqId(0), 3).is_ok());  // reserved but nothing written
  auto swapped = kv.swap_out(SeqId(0), SwapCompression::Lz4);
  ASSERT_TRUE(swapped.is_ok());
  EXPECT_EQ(swapped->n_positions, 0);
  EXPECT_TRUE(swapped->data.empty());
  EXPECT_EQ(kv.blocks().n_blocks_free(), 2);
  EXPECT_TRUE(kv.swap_in(SeqId(0), *swapped).is_ok());
  EXPECT_EQ(kv.n_positions(SeqId(0)), 0);
}

TEST(PagedKvCache, ALargePoolCostsNothingUntilUsed) {
  // 1 GiB of address space; only the block written is ever touched.
  const KvShape shape{32, 8, 128, KvType::F16};
  const int n_blocks = paged_kv_blocks_for_bytes(shape, 16, int64_t{1} << 30);
  ASSERT_EQ(n_blocks, 512);  // 2 MiB blocks
  PagedKvCache kv(shape, n_blocks, 16, true);
  ASSERT_TRUE(kv.reserve(SeqId(0), 1).is_ok());
  static_cast<uint16_t*>(kv.key_row(31, SeqId(0), 0))[0] = 0x3c00;
  EXPECT_EQ(static_cast<uint16_t*>(kv.key_row(31, SeqId(0), 0))[0], 0x3c00);
  EXPECT_EQ(static_cast<uint16_t*>(kv.value_row(0, SeqId(0), 0))[5], 0);  // fresh pages read as zero
}

// 1 GiB blocks (32 layers, K and V, 4096 positions of 4 KiB rows).
constexpr KvShape kHugeShape{32, 8, 128, KvType::F32};

// A pool the address space cannot hold (here 1 PiB; in practice a --kv-memory
// under `ulimit -v`) is a Status naming its size, not a failed assertion.
TEST(PagedKvCache, CreateReportsAPoolThatCannotBeMapped) {
  auto kv = PagedKvCache::create(kHugeShape, 1 << 20, 4096, false);
  ASSERT_FALSE(kv.is_ok());
  EXPECT_EQ(kv.status().kind(), ErrorKind::IoError);
  EXPECT_NE(kv.status().message().find("cannot map a KV pool of 1048576.00 GiB (1048576 blocks)"), std::string::npos)
      << kv.status().message();
  EXPECT_NE(kv.status().message().find("lower --kv-memory"), std::string::npos);
  auto small = PagedKvCache::create(kShape, 8, 4, true);
  ASSERT_TRUE(small.is_ok()) << small.status().message();
  EXPECT_EQ((*small)->blocks().n_blocks_total(), 8);
}

}  // namespace
}  // namespace tern
