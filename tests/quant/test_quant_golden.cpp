// Our quantizers and decoders against fingerprints of ggml's output.
//
// The expected values are FNV-1a hashes of what ggml's reference C code
// (ggml/src/ggml-quants.c at llama.cpp commit 3f545bec, built with gcc -O2,
// no FMA) produced for test::mixed_row(64, 42) — 16384 floats covering normal,
// one-signed, sparse, outlier, zero-group and rounding-tie blocks at scales
// 2^-12 .. 2^4:
//   bytes:   quantize_row_<type>_ref (IQ4_NL: quantize_iq4_nl without imatrix,
//            IQ4_XS: quantize_row_iq4_xs_ref, which is quantize_iq4_xs without one;
//            MXFP4: quantize_row_mxfp4_ref, ggml 3f545be);
//            the search llama-quantize runs), i.e. llama-quantize's output;
//   decoded: dequantize_row_<type> of those bytes, as f32 bit patterns (Q8_1 has
//            no ggml decoder; its value is d*q computed in f32).
// They were generated once by linking ggml-quants.c into a throwaway program
// outside this repository; a mismatch means our bytes or floats changed.
#include <gtest/gtest.h>

#include <vector>

#include "quant/quant.h"
#include "quant_test_data.h"

namespace tern::quant {
namespace {

struct Golden {
  GgmlType type;
  uint64_t bytes_hash;
  uint64_t decoded_hash;
};

const Golden kGolden[] = {
    {GgmlType::Q4_0, 0xb336d442521ec220ull, 0xb01e934fa84e2c99ull},
    {GgmlType::Q4_1, 0x6d4345861d7973c6ull, 0x866f85ba22064ae5ull},
    {GgmlType::Q5_0, 0xc428e0a506e84a47ull, 0xf9d683109f565a73ull},
    {GgmlType::Q5_1, 0x0e798ee1fb746ea8ull, 0xa1b38a87c4071956ull},
    {GgmlType::Q8_0, 0xb6d01ead3faad17aull, 0xdf043089c06beaa3ull},
    {GgmlType::Q8_1, 0x664ed5d1c0156f89ull, 0xdf043089c06beaa3ull},
    {GgmlType::IQ4_NL, 0x93161b99227fadecull, 0x8385f239bd6ba5faull},
    {GgmlType::Q2_K, 0x8bac99d345f3c5c9ull, 0x7271f7fd0da1e569ull},
    {GgmlType::Q3_K, 0x2840c227015b6760ull, 0xe5365421b1269ab0ull},
    {GgmlType::Q4_K, 0x3b80ecc18fb85b5eull, 0xb7af021884033cdcull},
    {GgmlType::Q5_K, 0x2941a8212fb5d9d0ull, 0x308bc5bb2cba7a10ull},
    {GgmlType::Q6_K, 0x26758d287efed79bull, 0x8477abff76ee53d8ull},
    {GgmlType::Q8_K, 0xa0e124aebbced401ull, 0x678522bb9cebbb31ull},
    {GgmlType::IQ4_XS, 0x71cfb2fe9a2c3415ull, 0x8c856c6368791ca6ull},
    {GgmlType::MXFP4, 0x6eede10fb1da1573ull, 0xa126e2b75d1742d8ull},
};

TEST(QuantGolden, BytesAndDecodedFloatsMatchGgml) {
  const int n = 64 * 256;
  const auto x = test::mixed_row(64, 42);
  ASSERT_EQ(static_cast<int>(x.size()), n);
  for (const Golden& g : kGolden) {
    const TypeTraits* tr = traits(g.type);
    ASSERT_NE(tr, nullptr);
    std::vector<uint8_t> q(row_bytes(*tr, n));
    std::vector<float> y(n);
    tr->from_float(x.data(), q.data(), n);
    tr->to_float(q.data(), y.data(), n);
    const uint64_t bytes_hash = test::fnv1a(q.data(), q.size());
    const uint64_t decoded_hash = test::fnv1a(y.data(), y.size() * sizeof(float));
    EXPECT_EQ(bytes_hash, g.bytes_hash) << tr->name << ": got 0x" << std::hex << bytes_hash;
    EXPECT_EQ(decoded_hash, g.decoded_hash) << tr->name << ": got 0x" << std::hex << decoded_hash;
  }
}

// The input itself is pinned, so a mismatch above cannot come from the generator.
TEST(QuantGolden, InputIsDeterministic) {
  const auto x = test::mixed_row(64, 42);
  EXPECT_EQ(test::fnv1a(x.data(), x.size() * sizeof(float)), 0x435704fcecf90578ull);
}

}  // namespace
}  // namespace tern::quant
