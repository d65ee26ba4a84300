#include "gguf/value.h"

#include <cstdio>
#include <limits>

namespace tern::gguf {

Value Value::of_strings(const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(of_string(s));
  return of_array(ValueType::String, std::move(items));
}

Value Value::of_f32s(const std::vector<float>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (float f : v) items.push_back(of_f32(f));
  return of_array(ValueType::F32, std::move(items));
}

Value Value::of_i32s(const std::vector<int32_t>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(of_i32(x));
  return of_array(ValueType::I32, std::move(items));
}

bool Value::is_integer() const {
  switch (type_) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default:
      return false;
  }
}

std::optional<uint64_t> Value::as_u64() const {
  if (auto* u = std::get_if<uint64_t>(&v_)) return *u;
  if (auto* i = std::get_if<int64_t>(&v_)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> Value::as_i64() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> Value::as_f64() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v_)) return static_cast<double>(*u);
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  return std::nullopt;
}

std::string Value::to_display(size_t max_items) const {
  char buf[64];
  switch (type_) {
    case ValueType::Bool: return *as_bool() ? "true" : "false";
    case ValueType::F32: case ValueType::F64:
      std::snprintf(buf, sizeof buf, "%g", *as_f64());
      return buf;
    case ValueType::String: {
      std::string s = *as_string();
      if (s.size() > 120) s = s.substr(0, 117) + "...";
      std::string out = "\"";
      for (char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '"') out += "\\\"";
        else out += c;
      }
      return out + "\"";
    }
    case ValueType::Array: {
      const Array& a = *as_array();
      std::string out = std::string(value_type_name(a.elem_type)) + "[" + std::to_string(a.items.size()) + "] [";
      for (size_t i = 0; i < a.items.size() && i < max_items; ++i) {
        if (i) out += ", ";
        out += a.items[i].to_display(max_items);
      }
      if (a.items.size() > max_items) out += ", ...";
      return out + "]";
    }
    default:
      if (auto u = std::get_if<uint64_t>(&v_)) return std::to_string(*u);
      return std::to_string(*std::get_if<int64_t>(&v_));
  }
}

}  // namespace tern::gguf
