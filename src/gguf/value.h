// gguf/value.h — one GGUF metadata value (scalar, string or nested array).
//
// Integers keep their declared type but are read through as_u64/as_i64 with
// range checks, because writers disagree on u32 vs i32 vs u64 for the same key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gguf/gguf_format.h"

namespace tern::gguf {

class Value;

struct Array {
  ValueType elem_type = ValueType::U8;
  std::vector<Value> items;
};

class Value {
 public:
  Value() = default;
  static Value of_u8(uint8_t v) { return Value(ValueType::U8, static_cast<uint64_t>(v)); }
  static Value of_i8(int8_t v) { return Value(ValueType::I8, static_cast<int64_t>(v)); }
  static Value of_u16(uint16_t v) { return Value(ValueType::U16, static_cast<uint64_t>(v)); }
  static Value of_i16(int16_t v) { return Value(ValueType::I16, static_cast<int64_t>(v)); }
  static Value of_u32(uint32_t v) { return Value(ValueType::U32, static_cast<uint64_t>(v)); }
  static Value of_i32(int32_t v) { return Value(ValueType::I32, static_cast<int64_t>(v)); }
  static Value of_u64(uint64_t v) { return Value(ValueType::U64, v); }
  static Value of_i64(int64_t v) { return Value(ValueType::I64, v); }
  static Value of_f32(float v) { return Value(ValueType::F32, static_cast<double>(v)); }
  static Value of_f64(double v) { return Value(ValueType::F64, v); }
  static Value of_bool(bool v) { return Value(ValueType::Bool, v); }
  static Value of_string(std::string v) { return Value(ValueType::String, std::move(v)); }
  static Value of_array(ValueType elem_type, std::vector<Value> items) {
    return Value(ValueType::Array, Array{elem_type, std::move(items)});
  }
  static Value of_strings(const std::vector<std::string>& v);
  static Value of_f32s(const std::vector<float>& v);
  static Value of_i32s(const std::vector<int32_t>& v);

  ValueType type() const { return type_; }
  bool is_integer() const;
  bool is_float() const { return type_ == ValueType::F32 || type_ == ValueType::F64; }

  // Typed reads; nullopt when the type does not fit or the value is out of range.
  std::optional<uint64_t> as_u64() const;
  std::optional<int64_t> as_i64() const;
  std::optional<double> as_f64() const;  // floats and integers
  std::optional<bool> as_bool() const;
  const std::string* as_string() const { return std::get_if<std::string>(&v_); }
  const Array* as_array() const { return std::get_if<Array>(&v_); }

  // Short human rendering for `tern info` (arrays are summarised).
  std::string to_display(size_t max_items = 8) const;

 private:
  using Storage = std::variant<uint64_t, int64_t, double, bool, std::string, Array>;
  Value(ValueType t, Storage v) : type_(t), v_(std::move(v)) {}
  ValueType type_ = ValueType::U8;
  Storage v_ = uint64_t{0};
};

}  // namespace tern::gguf
