// Writer → reader round trips: every value type, nested arrays, key order,
// tensors of several types and odd sizes, default and custom alignment, and
// the mmap path through write() + open().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

using test::values_equal;
using V = Value;

std::vector<std::pair<std::string, Value>> sample_metadata() {
  using L8 = std::numeric_limits<int8_t>;
  using L16 = std::numeric_limits<int16_t>;
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  using LF = std::numeric_limits<float>;
  using LD = std::numeric_limits<double>;
  std::vector<std::pair<std::string, Value>> kv = {
      // Deliberately not sorted: order must be kept as inserted.
      {"zz.first", V::of_string("written first")},
      {"general.architecture", V::of_string("llama")},
      {"t.u8", V::of_u8(255)},
      {"t.u8.zero", V::of_u8(0)},
      {"t.i8", V::of_i8(L8::min())},
      {"t.i8.max", V::of_i8(L8::max())},
      {"t.u16", V::of_u16(0xFFFF)},
      {"t.i16", V::of_i16(L16::min())},
      {"t.u32", V::of_u32(0xFFFFFFFFu)},
      {"t.i32", V::of_i32(L32::min())},
      {"t.i32.neg1", V::of_i32(-1)},
      {"t.f32", V::of_f32(-1.5e-7f)},
      {"t.f32.inf", V::of_f32(-LF::infinity())},
      {"t.f32.denorm", V::of_f32(LF::denorm_min())},
      {"t.f32.negzero", V::of_f32(-0.0f)},
      {"t.f32.max", V::of_f32(LF::max())},
      {"t.f32.nan", V::of_f32(LF::quiet_NaN())},
      {"t.bool.true", V::of_bool(true)},
      {"t.bool.false", V::of_bool(false)},
      {"t.string", V::of_string("h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93\n\t\"quoted\"")},
      {"t.string.empty", V::of_string("")},
      {"t.string.long", V::of_string(std::string(1000, 'x') + "end")},
      {"t.u64", V::of_u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", V::of_i64(L64::min())},
      {"t.f64", V::of_f64(3.141592653589793)},
      {"t.f64.tiny", V::of_f64(LD::denorm_min())},
      {"", V::of_string("an empty key is still a key")},
      {"a.last.scalar", V::of_u32(7)},
  };
  // One array of every scalar type, and an empty one of each.
  kv.emplace_back("arr.u8", V::of_array(ValueType::U8, {V::of_u8(0), V::of_u8(1), V::of_u8(255)}));
  kv.emplace_back("arr.i8", V::of_array(ValueType::I8, {V::of_i8(-128), V::of_i8(0), V::of_i8(127)}));
  kv.emplace_back("arr.u16", V::of_array(ValueType::U16, {V::of_u16(1), V::of_u16(0xFFFF)}));
  kv.emplace_back("arr.i16", V::of_array(ValueType::I16, {V::of_i16(-32768), V::of_i16(32767)}));
  kv.emplace_back("arr.u32", V::of_array(ValueType::U32, {V::of_u32(0), V::of_u32(0xDEADBEEF)}));
  kv.emplace_back("arr.i32", V::of_i32s({-1, 0, 1, L32::max(), L32::min()}));
  kv.emplace_back("arr.f32", V::of_f32s({0.0f, -0.0f, 1.25f, LF::infinity(), LF::denorm_min()}));
  kv.emplace_back("arr.bool", V::of_array(ValueType::Bool, {V::of_bool(true), V::of_bool(false), V::of_bool(true)}));
  kv.emplace_back("arr.string", V::of_strings({"a", "", "\xE2\x96\x81token", std::string(300, 'q')}));
  kv.emplace_back("arr.u64", V::of_array(ValueType::U64, {V::of_u64(0), V::of_u64(~0ull)}));
  kv.emplace_back("arr.i64", V::of_array(ValueType::I64, {V::of_i64(L64::min()), V::of_i64(L64::max())}));
  kv.emplace_back("arr.f64", V::of_array(ValueType::F64, {V::of_f64(-2.5), V::of_f64(1e300)}));
  for (uint32_t t = 0; t < kValueTypeCount; ++t)
    kv.emplace_back("empty." + std::string(value_type_name(static_cast<ValueType>(t))),
                    V::of_array(static_cast<ValueType>(t), {}));
  // Nested arrays: array of arrays of strings (one inner array empty), and three levels deep.
  kv.emplace_back("nested.strings",
                  V::of_array(ValueType::Array, {V::of_strings({"a", "bc"}), V::of_strings({}),
                                                 V::of_strings({"", "d e"})}));
  kv.emplace_back("nested.mixed",
                  V::of_array(ValueType::Array, {V::of_i32s({1, 2}), V::of_f32s({0.5f}), V::of_strings({"s"})}));
  kv.emplace_back("nested.deep",
                  V::of_array(ValueType::Array,
                              {V::of_array(ValueType::Array, {V::of_i32s({3}), V::of_i32s({})}),
                               V::of_array(ValueType::Array, {})}));
  kv.emplace_back("a.really.last", V::of_bool(true));
  return kv;
}

struct SampleTensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> bytes;
};

// Odd sizes on purpose: most byte counts are not multiples of any alignment.
std::vector<SampleTensor> sample_tensors() {
  std::vector<SampleTensor> ts = {
      {"blk.0.attn_q.weight", GgmlType::F32, {7, 3}, {}},      // 84 bytes
      {"one", GgmlType::F32, {1}, {}},                         // 4 bytes
      {"blk.0.attn_norm.weight", GgmlType::F16, {5}, {}},      // 10 bytes
      {"blk.0.ffn_up.weight", GgmlType::Q8_0, {64, 3}, {}},    // 204 bytes
      {"blk.0.ffn_down.weight", GgmlType::Q4_0, {32, 5, 1, 3}, {}},  // 270 bytes
      {"output.weight", GgmlType::Q4_K, {256, 3}, {}},         // 432 bytes
      {"token_embd.weight", GgmlType::F16, {3, 1, 1}, {}},     // 6 bytes, trailing 1-dims kept
  };
  std::mt19937 rng(1234);
  for (auto& t : ts) {
    auto size = type_size(static_cast<uint32_t>(t.type));
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    t.bytes.resize(n / size->block_elems * size->block_bytes);
    for (auto& b : t.bytes) b = static_cast<uint8_t>(rng());
  }
  return ts;
}

GgufWriter make_writer(uint32_t alignment) {
  GgufWriter w;
  for (auto& [k, v] : sample_metadata()) w.set(k, v);
  if (alignment) w.set("general.alignment", V::of_u32(alignment));
  for (const auto& t : sample_tensors()) {
    Status s = w.add_tensor(t.name, t.type, t.dims, t.bytes);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return w;
}

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Checks a parsed file against what make_writer(alignment) put in.
void expect_matches_sample(const GgufFile& f, uint32_t alignment) {
  const uint64_t align = alignment ? alignment : 32;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), align);

  auto kv = sample_metadata();
  if (alignment) kv.emplace_back("general.alignment", V::of_u32(alignment));
  ASSERT_EQ(f.metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, kv[i].first) << "key order differs at " << i;
    EXPECT_TRUE(values_equal(f.metadata()[i].second, kv[i].second)) << "key '" << kv[i].first << "'";
    ASSERT_NE(f.find(kv[i].first), nullptr);
  }
  // NaN survived as NaN (values_equal compared the bits; this states the intent).
  EXPECT_TRUE(std::isnan(*f.get_f64("t.f32.nan")));
  EXPECT_TRUE(std::signbit(*f.get_f64("t.f32.negzero")));

  const auto ts = sample_tensors();
  ASSERT_EQ(f.tensors().size(), ts.size());
  EXPECT_EQ(f.data_offset() % align, 0u);
  uint64_t expect_offset = 0;
  const uint8_t* base = f.tensors()[0].data;  // offset 0: the start of the data section
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(ts[i].name);
    EXPECT_EQ(t.name, ts[i].name);
    EXPECT_EQ(t.type, ts[i].type);
    ASSERT_EQ(t.n_dims, ts[i].dims.size());
    uint64_t n = 1;
    for (uint32_t d = 0; d < kMaxDims; ++d) {
      EXPECT_EQ(t.dims[d], d < t.n_dims ? ts[i].dims[d] : 1u) << "dim " << d;
      n *= t.dims[d];
    }
    EXPECT_EQ(t.n_elements, n);
    EXPECT_EQ(t.n_rows(), n / ts[i].dims[0]);
    EXPECT_EQ(t.n_bytes, ts[i].bytes.size());
    EXPECT_EQ(t.offset, expect_offset);
    EXPECT_EQ(t.offset % align, 0u);
    EXPECT_EQ(t.data, base + t.offset) << "data pointer not at data section + offset";
    ASSERT_NE(t.data, nullptr);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), ts[i].bytes) << "tensor bytes differ";
    EXPECT_EQ(f.find_tensor(t.name), &t);
    expect_offset = round_up(t.offset + t.n_bytes, align);
  }
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.file_size(), f.data_offset() + expect_offset);
  EXPECT_TRUE(test::check_consistent(f));
}

class RoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RoundTrip, InMemory) {
  const uint32_t alignment = GetParam();
  const std::vector<uint8_t> image = make_writer(alignment).to_bytes();
  const uint64_t align = alignment ? alignment : 32;
  auto f = GgufFile::from_bytes(image);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  expect_matches_sample(*f, alignment);
  // Padding between the tensor infos and the data, and between tensors, is zero.
  const auto ts = sample_tensors();
  uint64_t pos = f->data_offset();
  for (size_t i = 0; i < ts.size(); ++i) {
    pos += ts[i].bytes.size();
    const uint64_t end = round_up(pos, align);
    for (; pos < end; ++pos) ASSERT_EQ(image[pos], 0) << "non-zero padding at byte " << pos;
  }
}

TEST_P(RoundTrip, WriteThenOpenMapped) {
  const uint32_t alignment = GetParam();
  const GgufWriter w = make_writer(alignment);
  const std::string path = test::scratch_dir() + "/roundtrip_" + std::to_string(alignment) + ".gguf";
  Status s = w.write(path);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "temporary file left behind";

  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, w.to_bytes()) << "write() and to_bytes() disagree";

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  expect_matches_sample(*f, alignment);
  // The mapping is page-aligned, so the data is aligned in memory too.
  for (const auto& t : f->tensors())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % f->alignment(), 0u) << t.name;
  // A moved GgufFile keeps its mapping alive and its pointers valid.
  GgufFile moved = std::move(f).value();
  EXPECT_TRUE(test::check_consistent(moved));
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Alignments, RoundTrip, ::testing::Values(0u, 64u, 128u, 8u),
                         [](const auto& param_info) {
                           return param_info.param ? "align" + std::to_string(param_info.param) : std::string("default");
                         });

TEST(GgufWriter, MetadataOnlyFileHasNoDataSection) {
  GgufWriter w;
  w.set("general.architecture", V::of_string("llama"));
  w.set("tokenizer.ggml.tokens", V::of_strings({"<s>", "</s>", "a"}));
  const auto image = w.to_bytes();
  // 24-byte header + key (8+20) + type 4 + string (8+5) + key (8+21) + 4 + array (4+8+3*8+3+4+1)
  EXPECT_EQ(image.size(), 24u + 28 + 4 + 13 + 29 + 4 + 12 + 24 + 8);
  auto f = GgufFile::from_bytes(image);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->metadata().size(), 2u);
}

TEST(GgufWriter, SetReplacesInPlace) {
  GgufWriter w;
  w.set("a", V::of_u32(1));
  w.set("b", V::of_u32(2));
  w.set("a", V::of_string("replaced"));
  auto f = GgufFile::from_bytes(w.to_bytes());
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(*f->get_string("a"), "replaced");
  EXPECT_EQ(f->metadata()[1].first, "b");
}

TEST(GgufWriter, HeaderBytes) {
  GgufWriter w;
  w.set("k", V::of_u8(9));
  const auto b = w.to_bytes();
  const std::vector<uint8_t> expect = {'G', 'G', 'U', 'F', 3, 0, 0, 0,  // magic, version 3
                                       0, 0, 0, 0, 0, 0, 0, 0,          // n_tensors
                                       1, 0, 0, 0, 0, 0, 0, 0,          // n_kv
                                       1, 0, 0, 0, 0, 0, 0, 0, 'k',     // key
                                       0, 0, 0, 0,                      // type u8
                                       9};
  EXPECT_EQ(b, expect);
}

TEST(GgufWriter, AddTensorRejectsBadInput) {
  GgufWriter w;
  std::vector<uint8_t> b(16);
  using test::failed_with;
  EXPECT_TRUE(failed_with(w.add_tensor("short", GgmlType::F32, {5}, b), ErrorKind::InvalidArgument, {"short", "16", "20"}));
  EXPECT_TRUE(failed_with(w.add_tensor("nodims", GgmlType::F32, {}, {}), ErrorKind::InvalidArgument, {"nodims"}));
  EXPECT_TRUE(failed_with(w.add_tensor("fivedims", GgmlType::F32, {1, 1, 1, 1, 4}, b), ErrorKind::InvalidArgument, {"fivedims"}));
  EXPECT_TRUE(failed_with(w.add_tensor("q", GgmlType::Q4_0, {16}, std::vector<uint8_t>(9)), ErrorKind::InvalidArgument, {"q", "block"}));
  EXPECT_TRUE(failed_with(w.add_tensor("t99", static_cast<GgmlType>(99), {4}, b), ErrorKind::InvalidArgument, {"t99"}));
  // A zero dimension or an element count that wraps around would make a file the reader refuses.
  EXPECT_TRUE(failed_with(w.add_tensor("zero", GgmlType::F32, {4, 0}, {}), ErrorKind::InvalidArgument, {"zero"}));
  EXPECT_TRUE(failed_with(w.add_tensor("wrap", GgmlType::F32, {uint64_t{1} << 32, uint64_t{1} << 32}, {}),
                          ErrorKind::InvalidArgument, {"wrap"}));
  ASSERT_TRUE(w.add_tensor("ok", GgmlType::F32, {4}, b).is_ok());
  EXPECT_TRUE(failed_with(w.add_tensor("ok", GgmlType::F32, {4}, b), ErrorKind::InvalidArgument, {"ok", "twice"}));
  auto f = GgufFile::from_bytes(w.to_bytes());
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 1u);  // the refused tensors left no trace
}

TEST(GgufWriter, InvalidAlignmentDoesNotCrashAndIsRefusedOnRead) {
  for (uint32_t bad : {0u, 48u}) {
    GgufWriter w;
    w.set("general.alignment", V::of_u32(bad));
    ASSERT_TRUE(w.add_tensor("w", GgmlType::F32, {3}, std::vector<uint8_t>(12)).is_ok());
    EXPECT_TRUE(test::parse_fails(w.to_bytes(), ErrorKind::InvalidFile, {"general.alignment"})) << bad;
  }
}

TEST(GgufWriter, WriteToMissingDirectoryIsIoError) {
  GgufWriter w;
  w.set("general.architecture", V::of_string("llama"));
  const std::string path = test::scratch_dir() + "/no/such/dir/x.gguf";
  EXPECT_TRUE(test::failed_with(w.write(path), ErrorKind::IoError, {"x.gguf"}));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, WriteReplacesExistingFile) {
  const std::string path = test::scratch_dir() + "/replace.gguf";
  GgufWriter a;
  a.set("v", V::of_u32(1));
  a.set("long", V::of_string(std::string(500, 'z')));
  ASSERT_TRUE(a.write(path).is_ok());
  GgufWriter b;
  b.set("v", V::of_u32(2));
  ASSERT_TRUE(b.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->file_size(), b.to_bytes().size());
  EXPECT_EQ(*f->get_u64("v"), 2u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tern::gguf
