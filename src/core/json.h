// core/json.h — tern's JSON value, reader and writer, for the bytes clients
// and files send (requests, JSONL lines, SSE chunks, safetensors headers).
//
// Why not nlohmann::json for these: its destructor allocates (it moves nested
// values onto a heap stack to avoid deep recursion), so a std::bad_alloc
// during teardown — while a failed parse unwinds, say — ends in
// std::terminate. Here teardown only frees: nesting is bounded when parsing
// (max_depth), so the recursive destructor is bounded too.
//
// Objects keep their members in the order sent (schemas' property order and
// tools are printed back as sent). A key sent twice is kept twice; lookups
// find the last one, as Python's json and nlohmann do.
//
// Accessors of a specific type (as_string, as_array, …) are for values whose
// type the caller has checked: the wrong type is a programming error (an
// assert), not bad input. Members and elements live in vectors: a reference to
// one stays valid until its object or array gains another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern {

class Json {
 public:
  enum class Type : uint8_t { Null, Bool, Int, Uint, Double, String, Array, Object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;

  // Deep enough for any request or config seen in practice; the recursion a
  // parse (and later the destructor) may use is bounded by it.
  static constexpr int kDefaultMaxDepth = 256;

  Json() noexcept {}
  Json(std::nullptr_t) noexcept {}  // NOLINT: implicit by design, as are the others
  Json(bool b) noexcept : type_(Type::Bool) { u_.b = b; }
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json(T v) noexcept {  // NOLINT
    if constexpr (std::is_signed_v<T>) {
      type_ = Type::Int, u_.i = v;
    } else if (static_cast<uint64_t>(v) <= static_cast<uint64_t>(INT64_MAX)) {
      type_ = Type::Int, u_.i = static_cast<int64_t>(v);
    } else {
      type_ = Type::Uint, u_.u = v;
    }
  }
  Json(double v) noexcept : type_(Type::Double) { u_.d = v; }  // NOLINT
  Json(float v) noexcept : Json(static_cast<double>(v)) {}     // NOLINT
  Json(std::string s);                                         // NOLINT
  Json(std::string_view s) : Json(std::string(s)) {}           // NOLINT
  Json(const char* s) : Json(std::string(s)) {}                // NOLINT
  Json(Array a);                                               // NOLINT
  Json(Object o);                                              // NOLINT
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Json(const Json& other);
  Json(Json&& other) noexcept : type_(other.type_), u_(other.u_) { other.type_ = Type::Null; }
  Json& operator=(const Json& other);
  Json& operator=(Json&& other) noexcept;
  ~Json() { release(); }

  Type type() const { return type_; }
  // "null", "boolean", "integer", "number", "string", "array" or "object": for error messages.
  const char* type_name() const;
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_integer() const { return type_ == Type::Int || type_ == Type::Uint; }
  bool is_number() const { return is_integer() || type_ == Type::Double; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  bool as_bool() const;
  double as_double() const;                // any number
  std::optional<int64_t> to_int64() const;  // an integer that fits, else nullopt (also for 1.0)
  std::optional<uint64_t> to_uint64() const;
  const std::string& as_string() const;
  std::string& as_string();
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Objects: the last member named `key`, or nullptr (also when this is not an object).
  const Json* find(std::string_view key) const;
  Json* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // The member, or a null value when absent or when this is not an object.
  const Json& operator[](std::string_view key) const;
  const Json& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  // The member, appended as null when absent; a null value becomes an object first.
  Json& operator[](std::string_view key);
  Json& operator[](const char* key) { return (*this)[std::string_view(key)]; }
  // An object's members as Python's json.loads keeps them: each key once, at
  // the place it first appeared, with the value it was last given. Linear
  // time, so a hostile object of a million keys costs no more than reading it.
  std::vector<std::pair<std::string_view, const Json*>> distinct_members() const;
  // Removes every member named `key` from an object; returns how many.
  size_t erase(std::string_view key);
  // Arrays: element i (asserted in range).
  const Json& operator[](size_t i) const;
  Json& operator[](size_t i);
  // Appends to an array; a null value becomes an array first.
  void push_back(Json v);
  // An array's elements, for range-for; an empty range for anything else
  // (objects: as_object() or distinct_members()).
  const Json* begin() const { return type_ == Type::Array ? u_.a->data() : nullptr; }
  const Json* end() const { return type_ == Type::Array ? u_.a->data() + u_.a->size() : nullptr; }
  // Elements of an array or members of an object; 0 for anything else.
  size_t size() const;
  bool empty() const { return size() == 0; }

  // Same value: numbers by value (1 == 1.0), strings by bytes, arrays element
  // by element, objects member by member in order (as ordered JSON compares).
  friend bool operator==(const Json& a, const Json& b);
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

  // Compact text (no spaces), strings as UTF-8 with only '"', '\\' and control
  // characters escaped; bytes that are not valid UTF-8 are written as U+FFFD,
  // and a non-finite number as null, so the output is always valid JSON.
  std::string dump() const;
  void dump_to(std::string& out) const;
  // The same, one element or member per line, `indent` spaces a level (as
  // Python's json.dumps(indent=N) lays it out).
  std::string dump(int indent) const;

  // RFC 8259 text (a UTF-8 byte-order mark at the start is skipped) with
  // nothing but whitespace after it, nested at most max_depth deep. Errors
  // name the place: "invalid JSON at byte 12: expected ':'", or in text of
  // several lines "invalid JSON at line 3, column 7 (byte 40): ...".
  static Result<Json> parse(std::string_view text, int max_depth = kDefaultMaxDepth);

 private:
  void release() noexcept;
  void dump_to(std::string& out, int indent, int level) const;
  void copy_from(const Json& other);

  Type type_ = Type::Null;
  union U {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    std::string* s;
    Array* a;
    Object* o;
  } u_{};
};

// Appends `s` as a JSON string literal (quotes included), as Json::dump writes strings.
void json_append_string(std::string& out, std::string_view s);

}  // namespace tern
