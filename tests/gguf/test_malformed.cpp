// Malformed images, one defect each: every one is refused with a Status whose
// kind is right and whose message names the problem (and the key or tensor).
// Hostile counts and lengths must be refused before anything is allocated.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "gguf/reader.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

using test::ByteImage;
using test::parse_fails;
using test::tid;
constexpr ErrorKind kBad = ErrorKind::InvalidFile;
constexpr uint64_t kHuge = uint64_t{1} << 63;
constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// Header with one tensor and one metadata pair, then the given tensor info,
// padding and `data_bytes` of data.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                size_t data_bytes = 64) {
  ByteImage b;
  b.header(1, 1).kv_string("general.architecture", "llama");
  b.tensor_info("blk.0.bad", dims, type, offset).pad_to(32).zeros(data_bytes);
  return b.take();
}

// A file whose only metadata value is `value` of `type` under key "k.bad".
std::vector<uint8_t> one_value(ValueType type, const std::vector<uint8_t>& value) {
  ByteImage b;
  b.header(0, 1).kv("k.bad", type).raw(value);
  return b.take();
}

std::vector<uint8_t> le(uint64_t v, int n) {
  std::vector<uint8_t> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}
std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(GgufMalformed, BadMagic) {
  ByteImage b;
  b.u32(0x4C4D4747).u32(3).u64(0).u64(0);  // "GGML"
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"magic"}));
  ByteImage be;  // magic written big-endian
  be.u32(0x47475546).u32(3).u64(0).u64(0);
  EXPECT_TRUE(parse_fails(be.take(), kBad, {"magic"}));
  std::vector<uint8_t> text = {'{', '"', 'a', '"', ':', '1', '}', '\n'};
  EXPECT_TRUE(parse_fails(text, kBad, {"magic"}));
}

TEST(GgufMalformed, TooShortForAHeader) {
  EXPECT_TRUE(parse_fails({}, kBad, {"truncated", "magic"}));
  EXPECT_TRUE(parse_fails({'G', 'G', 'U'}, kBad, {"truncated", "magic"}));
  EXPECT_TRUE(parse_fails({'G', 'G', 'U', 'F', 3, 0}, kBad, {"truncated", "version"}));
  ByteImage b;
  b.u32(kMagic).u32(3).u64(0).u32(0);  // n_kv cut in half
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"truncated", "metadata count"}));
}

TEST(GgufMalformed, HugeCountsAreRefusedWithoutAllocating) {
  struct Case { uint64_t n_tensors, n_kv; const char* word; };
  const Case cases[] = {
      {0, kHuge, "metadata count"}, {0, kMax64, "metadata count"},   {1, 1000, "metadata count"},
      {kHuge, 1, "tensor count"},   {kMax64, 1, "tensor count"},     {1u << 30, 1, "tensor count"},
  };
  for (const Case& c : cases) {
    ByteImage b;
    b.header(c.n_tensors, c.n_kv).kv_string("general.architecture", "llama").zeros(64);
    test::reset_peak_allocation();
    EXPECT_TRUE(parse_fails(b.take(), kBad, {c.word, std::to_string(c.n_kv == 1 ? c.n_tensors : c.n_kv)}))
        << c.n_tensors << " " << c.n_kv;
    EXPECT_LT(test::peak_allocation(), 4096u) << "the parser reserved memory for a count it had not checked";
  }
}

TEST(GgufMalformed, CountLargerThanContentIsTruncation) {
  ByteImage b;
  b.header(0, 3).kv_string("general.architecture", "llama").kv_u32("a", 1).zeros(6);  // 3rd pair missing
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"truncated"}));
}

TEST(GgufMalformed, HugeStringLengths) {
  test::reset_peak_allocation();
  ByteImage key;  // the key's own length
  key.header(0, 1).u64(kHuge).zeros(40);
  EXPECT_TRUE(parse_fails(key.take(), kBad, {"metadata key", "length", std::to_string(kHuge)}));

  EXPECT_TRUE(parse_fails(one_value(ValueType::String, cat({le(kMax64, 8), {'a', 'b'}})), kBad,
                          {"'k.bad'", "length", "beyond the end"}));
  // Exactly one byte too long.
  EXPECT_TRUE(parse_fails(one_value(ValueType::String, cat({le(3, 8), {'a', 'b'}})), kBad, {"'k.bad'", "length 3"}));

  ByteImage tname;
  tname.header(1, 0).u64(kHuge - 1).zeros(64);
  EXPECT_TRUE(parse_fails(tname.take(), kBad, {"tensor name", "length"}));
  EXPECT_LT(test::peak_allocation(), 4096u);
}

TEST(GgufMalformed, HugeArrayLengths) {
  test::reset_peak_allocation();
  for (ValueType elem : {ValueType::U8, ValueType::I32, ValueType::F64, ValueType::String, ValueType::Array}) {
    for (uint64_t n : {kHuge, kMax64, uint64_t{1} << 40, uint64_t{100}}) {
      auto img = one_value(ValueType::Array, cat({le(static_cast<uint32_t>(elem), 4), le(n, 8), std::vector<uint8_t>(24)}));
      EXPECT_TRUE(parse_fails(img, kBad, {"'k.bad'", std::to_string(n)})) << value_type_name(elem) << " n=" << n;
    }
  }
  EXPECT_LT(test::peak_allocation(), 4096u) << "array storage reserved before its length was checked";
}

TEST(GgufMalformed, NestedArrayLengthHugeInsideValidOuter) {
  // Outer array of 2 arrays; the second claims 2^62 u32s.
  auto inner_ok = cat({le(4, 4), le(1, 8), le(7, 4)});
  auto inner_bad = cat({le(4, 4), le(uint64_t{1} << 62, 8), le(7, 4)});
  test::reset_peak_allocation();
  EXPECT_TRUE(parse_fails(one_value(ValueType::Array, cat({le(9, 4), le(2, 8), inner_ok, inner_bad})), kBad,
                          {"'k.bad'", "elements"}));
  EXPECT_LT(test::peak_allocation(), 4096u);
}

TEST(GgufMalformed, UnknownValueType) {
  for (uint32_t t : {13u, 99u, 0xFFFFFFFFu}) {
    ByteImage b;
    b.header(0, 1).str("k.weird").u32(t).zeros(16);
    EXPECT_TRUE(parse_fails(b.take(), kBad, {"'k.weird'", "unknown value type " + std::to_string(t)}));
  }
}

TEST(GgufMalformed, UnknownArrayElementType) {
  for (uint32_t t : {13u, 200u}) {
    EXPECT_TRUE(parse_fails(one_value(ValueType::Array, cat({le(t, 4), le(1, 8), le(0, 8)})), kBad,
                            {"'k.bad'", "element type " + std::to_string(t)}));
  }
  // The same inside a nested array.
  auto inner = cat({le(77, 4), le(0, 8)});
  EXPECT_TRUE(parse_fails(one_value(ValueType::Array, cat({le(9, 4), le(1, 8), inner})), kBad,
                          {"'k.bad'", "element type 77"}));
}

// `depth` arrays, each holding one array, the innermost holding u8 {1, 2}.
std::vector<uint8_t> nested(int depth) {
  ByteImage v;
  for (int i = 0; i < depth - 1; ++i) v.u32(9).u64(1);
  return v.u32(0).u64(2).u8(1).u8(2).take();
}

TEST(GgufMalformed, ArraysNestedTooDeep) {
  auto ok = GgufFile::from_bytes(one_value(ValueType::Array, nested(4)));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  const Value* v = ok->find("k.bad");
  for (int i = 0; i < 3; ++i) v = &v->as_array()->items.at(0);
  EXPECT_EQ(v->as_array()->elem_type, ValueType::U8);
  EXPECT_EQ(*v->as_array()->items.at(1).as_u64(), 2u);

  EXPECT_TRUE(parse_fails(one_value(ValueType::Array, nested(100)), kBad, {"'k.bad'", "nested"}));
  EXPECT_TRUE(parse_fails(one_value(ValueType::Array, nested(100000)), kBad, {"'k.bad'", "nested"}));
}

TEST(GgufMalformed, BoolMustBeZeroOrOne) {
  EXPECT_TRUE(parse_fails(one_value(ValueType::Bool, {2}), kBad, {"'k.bad'", "bool", "2"}));
  EXPECT_TRUE(parse_fails(one_value(ValueType::Bool, {0xFF}), kBad, {"'k.bad'", "255"}));
  EXPECT_TRUE(parse_fails(one_value(ValueType::Array, cat({le(7, 4), le(3, 8), {1, 0, 2}})), kBad,
                          {"'k.bad'", "bool"}));
  ASSERT_TRUE(GgufFile::from_bytes(one_value(ValueType::Bool, {1})).is_ok());
}

TEST(GgufMalformed, TensorDimensionCount) {
  EXPECT_TRUE(parse_fails(one_tensor({}, 0, 0), kBad, {"'blk.0.bad'", "0 dimensions"}));
  EXPECT_TRUE(parse_fails(one_tensor({1, 1, 1, 1, 1}, 0, 0), kBad, {"'blk.0.bad'", "5 dimensions"}));
  ByteImage b;
  b.header(1, 0).str("t").u32(0xFFFFFFFF).zeros(64);
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"'t'", "4294967295 dimensions"}));
}

TEST(GgufMalformed, ZeroDimension) {
  EXPECT_TRUE(parse_fails(one_tensor({4, 0}, 0, 0), kBad, {"'blk.0.bad'", "dimension 0"}));
  EXPECT_TRUE(parse_fails(one_tensor({0}, 0, 0), kBad, {"'blk.0.bad'", "dimension 0"}));
}

TEST(GgufMalformed, DimensionProductOverflow) {
  const uint64_t p32 = uint64_t{1} << 32;
  EXPECT_TRUE(parse_fails(one_tensor({p32, p32}, 0, 0), kBad, {"'blk.0.bad'", "dimension"}));
  EXPECT_TRUE(parse_fails(one_tensor({p32, p32, 16}, 0, 0), kBad, {"'blk.0.bad'", "dimension"}));
  EXPECT_TRUE(parse_fails(one_tensor({3, kMax64}, 0, 0), kBad, {"'blk.0.bad'", "dimension"}));
  EXPECT_TRUE(parse_fails(one_tensor({2, 2, 2, kHuge}, 0, 0), kBad, {"'blk.0.bad'", "dimension"}));
  // Large but representable: refused because the bytes are not in the file.
  EXPECT_TRUE(parse_fails(one_tensor({uint64_t{1} << 28, uint64_t{1} << 28}, tid(GgmlType::F64), 0), kBad,
                          {"'blk.0.bad'", "outside"}));
}

TEST(GgufMalformed, UnknownGgmlType) {
  EXPECT_TRUE(parse_fails(one_tensor({4}, 99, 0), kBad, {"'blk.0.bad'", "type id 99"}));
  EXPECT_TRUE(parse_fails(one_tensor({4}, 4, 0), kBad, {"'blk.0.bad'", "type id 4"}));  // removed Q4_2
  EXPECT_TRUE(parse_fails(one_tensor({4}, 0xFFFFFFFF, 0), kBad, {"'blk.0.bad'", "4294967295"}));
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlock) {
  EXPECT_TRUE(parse_fails(one_tensor({33, 2}, tid(GgmlType::Q4_0), 0, 256), kBad,
                          {"'blk.0.bad'", "Q4_0", "33", "block size 32"}));
  EXPECT_TRUE(parse_fails(one_tensor({128}, tid(GgmlType::Q4_K), 0, 256), kBad,
                          {"'blk.0.bad'", "Q4_K", "block size 256"}));
  // The row, not the element count, must be whole blocks: 16 x 2 is 32 elements but two half blocks.
  EXPECT_TRUE(parse_fails(one_tensor({16, 2}, tid(GgmlType::Q8_0), 0, 256), kBad, {"'blk.0.bad'", "row length 16"}));
}

TEST(GgufMalformed, TensorOffsetNotAligned) {
  EXPECT_TRUE(parse_fails(one_tensor({4}, 0, 16, 64), kBad, {"'blk.0.bad'", "offset 16", "alignment 32"}));
  EXPECT_TRUE(parse_fails(one_tensor({4}, 0, 1, 64), kBad, {"'blk.0.bad'", "alignment"}));
  // Aligned to the default 32 but not to a declared 64.
  ByteImage b;
  b.header(1, 1).kv_u32("general.alignment", 64).tensor_info("t64", {4}, 0, 32).pad_to(64).zeros(128);
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"'t64'", "alignment 64"}));
}

TEST(GgufMalformed, TensorDataBeyondTheFile) {
  EXPECT_TRUE(parse_fails(one_tensor({17}, 0, 0, 64), kBad, {"'blk.0.bad'", "outside"}));  // 68 > 64
  EXPECT_TRUE(parse_fails(one_tensor({4}, 0, 64, 64), kBad, {"'blk.0.bad'", "outside"}));  // starts at the end
  EXPECT_TRUE(parse_fails(one_tensor({4}, 0, 96, 64), kBad, {"'blk.0.bad'", "outside"}));
  // offset + size wraps around 2^64.
  EXPECT_TRUE(parse_fails(one_tensor({16}, 0, kMax64 - 31, 64), kBad, {"'blk.0.bad'", "outside"}));
  // Exactly fitting is fine.
  EXPECT_TRUE(GgufFile::from_bytes(one_tensor({16}, 0, 0, 64)).is_ok());
  EXPECT_TRUE(GgufFile::from_bytes(one_tensor({8}, 0, 32, 64)).is_ok());
}

TEST(GgufMalformed, DataSectionStartBeyondTheFile) {
  ByteImage b;
  b.header(1, 0).tensor_info("t", {1}, 0, 0);  // 57 bytes, padding to 64 missing
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"truncated", "data section"}));
}

TEST(GgufMalformed, DuplicateKey) {
  ByteImage b;
  b.header(0, 3).kv_string("general.architecture", "llama").kv_u32("llama.block_count", 2).kv_u32("llama.block_count", 3);
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"'llama.block_count'", "twice"}));
}

TEST(GgufMalformed, DuplicateTensorName) {
  ByteImage b;
  b.header(2, 0).tensor_info("output.weight", {4}, 0, 0).tensor_info("output.weight", {4}, 0, 32).pad_to(32).zeros(64);
  EXPECT_TRUE(parse_fails(b.take(), kBad, {"'output.weight'", "twice"}));
}

TEST(GgufMalformed, BadAlignmentKey) {
  auto with_alignment = [](ValueType type, std::vector<uint8_t> value) {
    ByteImage b;
    b.header(1, 1).kv("general.alignment", type).raw(value).tensor_info("t", {4}, 0, 0).pad_to(64).zeros(64);
    return b.take();
  };
  const std::initializer_list<std::string_view> words = {"general.alignment"};
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::U32, le(0, 4)), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::U32, le(48, 4)), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::U32, le(0xFFFFFFFF, 4)), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::U64, le((uint64_t{1} << 32) + 32, 8)), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::I32, le(static_cast<uint32_t>(-32), 4)), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::String, cat({le(2, 8), {'3', '2'}})), kBad, words));
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::F32, le(0x42000000, 4)), kBad, words));  // 32.0f
  EXPECT_TRUE(parse_fails(with_alignment(ValueType::Bool, {1}), kBad, words));
  // A valid value for contrast.
  auto ok = GgufFile::from_bytes(with_alignment(ValueType::U32, le(64, 4)));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->alignment(), 64u);
}

TEST(GgufOpen, MissingFileIsNotFound) {
  const std::string path = test::scratch_dir() + "/does_not_exist.gguf";
  auto f = GgufFile::open(path);
  EXPECT_TRUE(test::failed_with(f.status(), ErrorKind::NotFound, {"does_not_exist.gguf"}));
}

TEST(GgufOpen, DirectoryIsRefused) {
  auto f = GgufFile::open(test::scratch_dir());
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().kind(), ErrorKind::IoError) << f.status().message();
}

TEST(GgufOpen, MalformedFileMessageNamesThePath) {
  const std::string path = test::scratch_dir() + "/bad_tensor.gguf";
  const auto bytes = one_tensor({4}, 99, 0);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto f = GgufFile::open(path);
  EXPECT_TRUE(test::failed_with(f.status(), kBad, {path, "'blk.0.bad'", "99"}));
  std::filesystem::remove(path);
}

TEST(GgufOpen, EmptyFileIsTruncated) {
  const std::string path = test::scratch_dir() + "/empty.gguf";
  std::ofstream(path, std::ios::binary).close();
  auto f = GgufFile::open(path);
  EXPECT_TRUE(test::failed_with(f.status(), kBad, {"empty.gguf", "truncated"}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tern::gguf
