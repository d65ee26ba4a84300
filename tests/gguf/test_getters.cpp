// Typed metadata lookups and Value conversions: a missing key is NotFound, a
// wrong type or out-of-range value is InvalidFile naming the key, and the
// *_or variants fall back only when the key is absent.
#include <gtest/gtest.h>

#include <limits>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "gguf_test_util.h"

namespace tern::gguf {
namespace {

using test::failed_with;
constexpr ErrorKind kBad = ErrorKind::InvalidFile;

GgufFile getter_file() {
  GgufWriter w;
  w.set("neg.i32", Value::of_i32(-7));
  w.set("pos.i32", Value::of_i32(4096));
  w.set("u8", Value::of_u8(200));
  w.set("u32", Value::of_u32(32000));
  w.set("big.u64", Value::of_u64(std::numeric_limits<uint64_t>::max()));
  w.set("min.i64", Value::of_i64(std::numeric_limits<int64_t>::min()));
  w.set("f32", Value::of_f32(1e-5f));
  w.set("f64", Value::of_f64(10000.0));
  w.set("flag", Value::of_bool(true));
  w.set("name", Value::of_string("tiny"));
  w.set("tokens", Value::of_strings({"a", "b"}));
  w.set("scores", Value::of_f32s({0.5f, 0.25f}));
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return std::move(f).value();
}

TEST(GgufGetters, UnsignedReads) {
  const GgufFile f = getter_file();
  EXPECT_EQ(*f.get_u64("pos.i32"), 4096u);  // a non-negative signed value is fine
  EXPECT_EQ(*f.get_u64("u8"), 200u);
  EXPECT_EQ(*f.get_u64("u32"), 32000u);
  EXPECT_EQ(*f.get_u64("big.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(failed_with(f.get_u64("neg.i32").status(), kBad, {"'neg.i32'", "non-negative", "-7"}));
  EXPECT_TRUE(failed_with(f.get_u64("min.i64").status(), kBad, {"'min.i64'"}));
  EXPECT_TRUE(failed_with(f.get_u64("f32").status(), kBad, {"'f32'", "f32"}));
  EXPECT_TRUE(failed_with(f.get_u64("flag").status(), kBad, {"'flag'", "bool"}));
  EXPECT_TRUE(failed_with(f.get_u64("name").status(), kBad, {"'name'", "string"}));
  EXPECT_TRUE(failed_with(f.get_u64("missing.key").status(), ErrorKind::NotFound, {"'missing.key'"}));
}

TEST(GgufGetters, SignedReads) {
  const GgufFile f = getter_file();
  EXPECT_EQ(*f.get_i64("neg.i32"), -7);
  EXPECT_EQ(*f.get_i64("u32"), 32000);
  EXPECT_EQ(*f.get_i64("min.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(failed_with(f.get_i64("big.u64").status(), kBad, {"'big.u64'", "18446744073709551615"}));
  EXPECT_TRUE(failed_with(f.get_i64("tokens").status(), kBad, {"'tokens'", "array"}));
  EXPECT_TRUE(failed_with(f.get_i64("nope").status(), ErrorKind::NotFound, {"'nope'"}));
}

TEST(GgufGetters, FloatBoolStringReads) {
  const GgufFile f = getter_file();
  EXPECT_EQ(*f.get_f64("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(*f.get_f64("f64"), 10000.0);
  EXPECT_EQ(*f.get_f64("neg.i32"), -7.0);  // integers read as numbers
  EXPECT_TRUE(failed_with(f.get_f64("name").status(), kBad, {"'name'", "number"}));
  EXPECT_TRUE(failed_with(f.get_f64("flag").status(), kBad, {"'flag'"}));
  EXPECT_EQ(*f.get_bool("flag"), true);
  EXPECT_TRUE(failed_with(f.get_bool("u8").status(), kBad, {"'u8'", "bool"}));
  EXPECT_EQ(*f.get_string("name"), "tiny");
  EXPECT_TRUE(failed_with(f.get_string("u32").status(), kBad, {"'u32'", "string", "32000"}));
  EXPECT_TRUE(failed_with(f.get_string("tokens").status(), kBad, {"'tokens'"}));
  EXPECT_TRUE(failed_with(f.get_bool("absent").status(), ErrorKind::NotFound, {"'absent'"}));
  EXPECT_TRUE(failed_with(f.get_string("absent").status(), ErrorKind::NotFound, {"'absent'"}));
  EXPECT_TRUE(failed_with(f.get_f64("absent").status(), ErrorKind::NotFound, {"'absent'"}));
}

TEST(GgufGetters, ArrayReads) {
  const GgufFile f = getter_file();
  auto tokens = f.get_array("tokens", ValueType::String);
  ASSERT_TRUE(tokens.is_ok());
  ASSERT_EQ((*tokens)->items.size(), 2u);
  EXPECT_EQ(*(*tokens)->items[1].as_string(), "b");
  EXPECT_TRUE(failed_with(f.get_array("tokens", ValueType::F32).status(), kBad, {"'tokens'", "array of f32"}));
  EXPECT_TRUE(failed_with(f.get_array("name", ValueType::String).status(), kBad, {"'name'", "array of string"}));
  EXPECT_TRUE(failed_with(f.get_array("nope", ValueType::String).status(), ErrorKind::NotFound, {"'nope'"}));
  EXPECT_TRUE(f.get_array("scores", ValueType::F32).is_ok());
}

TEST(GgufGetters, FallbacksOnlyWhenAbsent) {
  const GgufFile f = getter_file();
  EXPECT_EQ(*f.get_u64_or("absent", 77), 77u);
  EXPECT_EQ(*f.get_u64_or("u32", 77), 32000u);
  EXPECT_TRUE(failed_with(f.get_u64_or("neg.i32", 77).status(), kBad, {"'neg.i32'"}));
  EXPECT_TRUE(failed_with(f.get_u64_or("name", 77).status(), kBad, {"'name'"}));
  EXPECT_EQ(*f.get_f64_or("absent", 0.5), 0.5);
  EXPECT_EQ(*f.get_f64_or("f64", 0.5), 10000.0);
  EXPECT_TRUE(failed_with(f.get_f64_or("name", 0.5).status(), kBad, {"'name'"}));
  EXPECT_EQ(*f.get_bool_or("absent", true), true);
  EXPECT_EQ(*f.get_bool_or("absent", false), false);
  EXPECT_EQ(*f.get_bool_or("flag", false), true);
  EXPECT_TRUE(failed_with(f.get_bool_or("u8", false).status(), kBad, {"'u8'"}));
}

TEST(GgufValue, IntegerConversionsCheckRange) {
  EXPECT_EQ(Value::of_i8(-1).as_u64(), std::nullopt);
  EXPECT_EQ(Value::of_i64(-1).as_i64(), -1);
  EXPECT_EQ(Value::of_u64(uint64_t{1} << 63).as_i64(), std::nullopt);
  EXPECT_EQ(Value::of_u64((uint64_t{1} << 63) - 1).as_i64(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Value::of_u16(65535).as_i64(), 65535);
  EXPECT_EQ(Value::of_bool(true).as_u64(), std::nullopt);
  EXPECT_EQ(Value::of_string("1").as_u64(), std::nullopt);
  EXPECT_EQ(Value::of_f32(1.0f).as_u64(), std::nullopt);
  EXPECT_EQ(Value::of_u8(3).as_bool(), std::nullopt);
  EXPECT_EQ(Value::of_u8(3).as_string(), nullptr);
  EXPECT_EQ(Value::of_u8(3).as_array(), nullptr);
  EXPECT_TRUE(Value::of_i16(-2).is_integer());
  EXPECT_FALSE(Value::of_f64(1).is_integer());
  EXPECT_TRUE(Value::of_f32(1).is_float());
  EXPECT_FALSE(Value::of_bool(false).is_integer());
}

TEST(GgufValue, Display) {
  EXPECT_EQ(Value::of_i32(-7).to_display(), "-7");
  EXPECT_EQ(Value::of_u64(18446744073709551615ull).to_display(), "18446744073709551615");
  EXPECT_EQ(Value::of_bool(false).to_display(), "false");
  EXPECT_EQ(Value::of_f32(0.5f).to_display(), "0.5");
  EXPECT_EQ(Value::of_string("a\"b\nc").to_display(), "\"a\\\"b\\nc\"");
  EXPECT_EQ(Value::of_i32s({1, 2, 3}).to_display(2), "i32[3] [1, 2, ...]");
  EXPECT_EQ(Value::of_strings({}).to_display(), "string[0] []");
  const std::string long_display = Value::of_string(std::string(500, 'x')).to_display();
  EXPECT_LT(long_display.size(), 130u);
  EXPECT_NE(long_display.find("..."), std::string::npos);
}

}  // namespace
}  // namespace tern::gguf
