// Hand-assembled images (not made by our writer): GGUF v2 parses, versions 1
// and 4 are refused, and the ggml type table matches the format reference.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf_format.h"
#include "gguf/reader.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

using test::ByteImage;
using test::parse_fails;
using test::tid;

// A v2 file, byte by byte: 3 metadata pairs, 2 tensors, 32-byte alignment.
std::vector<uint8_t> v2_image(uint32_t version = 2) {
  ByteImage b;
  b.u32(0x46554747).u32(version).u64(2).u64(3);
  b.str("general.architecture").u32(8).str("llama");
  b.str("llama.context_length").u32(4).u32(4096);
  b.str("tokenizer.ggml.scores").u32(9).u32(6).u64(2).put(0.5f).put(-1.0f);
  b.str("a").u32(2).u64(4).u64(2).u32(0).u64(0);          // F32 [4, 2] at 0, 32 bytes
  b.str("bb").u32(1).u64(32).u32(8).u64(32);               // Q8_0 [32] at 32, 34 bytes
  b.pad_to(32);
  for (int i = 0; i < 8; ++i) b.put(static_cast<float>(i) + 0.25f);
  for (int i = 0; i < 34; ++i) b.u8(static_cast<uint8_t>(100 + i));
  return b.take();
}

TEST(GgufLayout, HandAssembledV2Parses) {
  const auto image = v2_image();
  // Header 24 + kvs (28+4+13) + (28+4+4) + (29+4+4+8+8) + infos (9+4+16+4+8) + (10+4+8+4+8) = 233 → data at 256.
  auto f = GgufFile::from_bytes(image);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 256u);
  EXPECT_EQ(f->file_size(), 256u + 32 + 34);

  ASSERT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->metadata()[0].first, "general.architecture");
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->find("llama.context_length")->type(), ValueType::U32);
  EXPECT_EQ(*f->get_u64("llama.context_length"), 4096u);
  auto scores = f->get_array("tokenizer.ggml.scores", ValueType::F32);
  ASSERT_TRUE(scores.is_ok()) << scores.status().message();
  ASSERT_EQ((*scores)->items.size(), 2u);
  EXPECT_EQ(*(*scores)->items[0].as_f64(), 0.5);
  EXPECT_EQ(*(*scores)->items[1].as_f64(), -1.0);

  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo& a = f->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.type, GgmlType::F32);
  EXPECT_EQ(a.n_dims, 2u);
  EXPECT_EQ(a.dims[0], 4u);
  EXPECT_EQ(a.dims[1], 2u);
  EXPECT_EQ(a.n_elements, 8u);
  EXPECT_EQ(a.n_rows(), 2u);
  EXPECT_EQ(a.n_bytes, 32u);
  EXPECT_EQ(a.shape_string(), "[4, 2]");
  float x[8];
  std::memcpy(x, a.data, sizeof x);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], static_cast<float>(i) + 0.25f);
  const TensorInfo& bb = *f->find_tensor("bb");
  EXPECT_EQ(bb.type, GgmlType::Q8_0);
  EXPECT_EQ(bb.offset, 32u);
  EXPECT_EQ(bb.n_bytes, 34u);
  EXPECT_EQ(bb.data, a.data + 32);
  EXPECT_EQ(bb.data[0], 100);
  EXPECT_EQ(bb.data[33], 133);
}

TEST(GgufLayout, Version3OfTheSameBytesParses) {
  auto f = GgufFile::from_bytes(v2_image(3));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
}

TEST(GgufLayout, OtherVersionsAreUnsupported) {
  EXPECT_TRUE(parse_fails(v2_image(1), ErrorKind::Unsupported, {"version 1"}));
  EXPECT_TRUE(parse_fails(v2_image(4), ErrorKind::Unsupported, {"version 4"}));
  EXPECT_TRUE(parse_fails(v2_image(0), ErrorKind::Unsupported, {"version 0"}));
  EXPECT_TRUE(parse_fails(v2_image(0x03000000), ErrorKind::Unsupported, {"version 50331648"}));  // big-endian 3
}

TEST(GgufLayout, CustomAlignmentMovesTheDataSection) {
  // general.alignment 64: tensor offsets and the data start follow it.
  ByteImage b;
  b.header(2, 1).kv_u32("general.alignment", 64);
  b.tensor_info("x_tensor_1", {3}, tid(GgmlType::F32), 0);    // 12 bytes; infos end at 132
  b.tensor_info("y", {2}, tid(GgmlType::F16), 64);   // 4 bytes
  const size_t infos_end = b.size();
  b.pad_to(64);
  const size_t data = b.size();
  EXPECT_EQ(data % 64, 0u);
  EXPECT_GT(data, 32u * ((infos_end + 31) / 32)) << "test wants 64-alignment to differ from 32";
  b.zeros(64 + 4);
  auto f = GgufFile::from_bytes(b.take());
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), data);
  EXPECT_EQ(f->find_tensor("y")->data, f->find_tensor("x_tensor_1")->data + 64);
}

TEST(GgufLayout, VocabOnlyFileMayEndAfterMetadata) {
  ByteImage b;
  b.header(0, 1).kv_string("general.architecture", "gpt2");  // 68 bytes, no padding
  auto f = GgufFile::from_bytes(b.take());
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufLayout, EmptyFileCountsParse) {
  ByteImage b;
  b.header(0, 0);
  auto f = GgufFile::from_bytes(b.take());
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(f->metadata().empty());
}

// Block sizes from the format reference (docs/formats.md, ggml-common.h).
TEST(GgufFormat, TypeTableMatchesTheReference) {
  struct Row { uint32_t id; const char* name; uint32_t elems, bytes; };
  const Row rows[] = {
      {0, "F32", 1, 4},        {1, "F16", 1, 2},        {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
      {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},     {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},
      {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},  {20, "IQ4_NL", 32, 18},  {23, "IQ4_XS", 256, 136},
      {24, "I8", 1, 1},        {25, "I16", 1, 2},       {26, "I32", 1, 4},       {27, "I64", 1, 8},
      {28, "F64", 1, 8},       {30, "BF16", 1, 2},
  };
  for (const Row& r : rows) {
    auto s = type_size(r.id);
    ASSERT_TRUE(s.has_value()) << r.name;
    EXPECT_EQ(s->name, r.name);
    EXPECT_EQ(s->block_elems, r.elems) << r.name;
    EXPECT_EQ(s->block_bytes, r.bytes) << r.name;
    EXPECT_EQ(type_name(static_cast<GgmlType>(r.id)), r.name);
  }
  // Removed or never-assigned ids.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 99u, 0xFFFFFFFFu}) EXPECT_FALSE(type_size(id).has_value()) << id;
  EXPECT_EQ(type_name(static_cast<GgmlType>(99)), "unknown");
}

TEST(GgufFormat, ValueTypeSizesAndNames) {
  EXPECT_EQ(value_type_size(ValueType::U8), 1u);
  EXPECT_EQ(value_type_size(ValueType::Bool), 1u);
  EXPECT_EQ(value_type_size(ValueType::I16), 2u);
  EXPECT_EQ(value_type_size(ValueType::F32), 4u);
  EXPECT_EQ(value_type_size(ValueType::U64), 8u);
  EXPECT_EQ(value_type_size(ValueType::F64), 8u);
  EXPECT_EQ(value_type_size(ValueType::String), 0u);
  EXPECT_EQ(value_type_size(ValueType::Array), 0u);
  EXPECT_STREQ(value_type_name(ValueType::String), "string");
  EXPECT_STREQ(value_type_name(ValueType::F64), "f64");
  EXPECT_STREQ(value_type_name(static_cast<ValueType>(13)), "?");
}

}  // namespace
}  // namespace tern::gguf
