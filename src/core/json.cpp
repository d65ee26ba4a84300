// core/json.cpp — see json.h.
#include "core/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/assert.h"
#include "core/utf8.h"

namespace tern {

Json::Json(std::string s) : type_(Type::String) { u_.s = new std::string(std::move(s)); }
Json::Json(Array a) : type_(Type::Array) { u_.a = new Array(std::move(a)); }
Json::Json(Object o) : type_(Type::Object) { u_.o = new Object(std::move(o)); }

Json::Json(const Json& other) { copy_from(other); }

Json& Json::operator=(const Json& other) {
  if (this != &other) {
    Json copy(other);  // built first: if it throws, *this is unchanged
    *this = std::move(copy);
  }
  return *this;
}

Json& Json::operator=(Json&& other) noexcept {
  if (this != &other) {
    // `other` may live inside this value (j = std::move(j["a"])): detach before freeing.
    const Type t = other.type_;
    const U u = other.u_;
    other.type_ = Type::Null;
    release();
    type_ = t, u_ = u;
  }
  return *this;
}

void Json::copy_from(const Json& other) {
  switch (other.type_) {
    case Type::String: u_.s = new std::string(*other.u_.s); break;
    case Type::Array: u_.a = new Array(*other.u_.a); break;
    case Type::Object: u_.o = new Object(*other.u_.o); break;
    default: u_ = other.u_; break;
  }
  type_ = other.type_;
}

void Json::release() noexcept {
  switch (type_) {
    case Type::String: delete u_.s; break;
    case Type::Array: delete u_.a; break;
    case Type::Object: delete u_.o; break;
    default: break;
  }
  type_ = Type::Null;
}

const char* Json::type_name() const {
  switch (type_) {
    case Type::Null: return "null";
    case Type::Bool: return "boolean";
    case Type::Int:
    case Type::Uint: return "integer";
    case Type::Double: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

bool Json::as_bool() const {
  TERN_ASSERT(type_ == Type::Bool);
  return u_.b;
}

double Json::as_double() const {
  TERN_ASSERT(is_number());
  if (type_ == Type::Int) return static_cast<double>(u_.i);
  if (type_ == Type::Uint) return static_cast<double>(u_.u);
  return u_.d;
}

std::optional<int64_t> Json::to_int64() const {
  if (type_ == Type::Int) return u_.i;
  return std::nullopt;  // Uint holds only values above INT64_MAX
}

std::optional<uint64_t> Json::to_uint64() const {
  if (type_ == Type::Uint) return u_.u;
  if (type_ == Type::Int && u_.i >= 0) return static_cast<uint64_t>(u_.i);
  return std::nullopt;
}

const std::string& Json::as_string() const {
  TERN_ASSERT(type_ == Type::String);
  return *u_.s;
}
std::string& Json::as_string() {
  TERN_ASSERT(type_ == Type::String);
  return *u_.s;
}
const Json::Array& Json::as_array() const {
  TERN_ASSERT(type_ == Type::Array);
  return *u_.a;
}
Json::Array& Json::as_array() {
  TERN_ASSERT(type_ == Type::Array);
  return *u_.a;
}
const Json::Object& Json::as_object() const {
  TERN_ASSERT(type_ == Type::Object);
  return *u_.o;
}
Json::Object& Json::as_object() {
  TERN_ASSERT(type_ == Type::Object);
  return *u_.o;
}

const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (auto it = u_.o->rbegin(); it != u_.o->rend(); ++it)
    if (it->first == key) return &it->second;
  return nullptr;
}

Json* Json::find(std::string_view key) { return const_cast<Json*>(std::as_const(*this).find(key)); }

const Json& Json::operator[](std::string_view key) const {
  static const Json kNull;
  const Json* v = find(key);
  return v ? *v : kNull;
}

Json& Json::operator[](std::string_view key) {
  if (type_ == Type::Null) *this = object();
  TERN_ASSERT(type_ == Type::Object);
  if (Json* v = find(key)) return *v;
  u_.o->emplace_back(std::string(key), Json());
  return u_.o->back().second;
}

std::vector<std::pair<std::string_view, const Json*>> Json::distinct_members() const {
  std::vector<std::pair<std::string_view, const Json*>> out;
  if (type_ != Type::Object) return out;
  std::unordered_map<std::string_view, size_t> at;  // key -> its place in out
  at.reserve(u_.o->size());
  for (const Member& m : *u_.o) {
    auto [it, inserted] = at.try_emplace(m.first, out.size());
    if (inserted) out.emplace_back(m.first, &m.second);
    else out[it->second].second = &m.second;
  }
  return out;
}

size_t Json::erase(std::string_view key) {
  if (type_ != Type::Object) return 0;
  const size_t before = u_.o->size();
  u_.o->erase(std::remove_if(u_.o->begin(), u_.o->end(), [&](const Member& m) { return m.first == key; }),
              u_.o->end());
  return before - u_.o->size();
}

bool operator==(const Json& a, const Json& b) {
  using T = Json::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) {
      if (a.to_int64() && b.to_int64()) return *a.to_int64() == *b.to_int64();
      return a.to_uint64() && b.to_uint64() && *a.to_uint64() == *b.to_uint64();
    }
    return a.as_double() == b.as_double();
  }
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case T::Null: return true;
    case T::Bool: return a.u_.b == b.u_.b;
    case T::String: return *a.u_.s == *b.u_.s;
    case T::Array: return *a.u_.a == *b.u_.a;
    case T::Object: return *a.u_.o == *b.u_.o;
    default: return false;
  }
}

const Json& Json::operator[](size_t i) const {
  TERN_ASSERT(type_ == Type::Array && i < u_.a->size());
  return (*u_.a)[i];
}

Json& Json::operator[](size_t i) {
  TERN_ASSERT(type_ == Type::Array && i < u_.a->size());
  return (*u_.a)[i];
}

void Json::push_back(Json v) {
  if (type_ == Type::Null) *this = array();
  TERN_ASSERT(type_ == Type::Array);
  u_.a->push_back(std::move(v));
}

size_t Json::size() const {
  if (type_ == Type::Array) return u_.a->size();
  if (type_ == Type::Object) return u_.o->size();
  return 0;
}

// ---- writing ----

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const utf8::Decoded d = utf8::decode(s, i);
  return d.valid ? d.n_bytes : 0;
}

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  // The shortest digits that read back as d, laid out as nlohmann (and, but
  // for 1e15, Python) write them: plain notation while the decimal point falls
  // within 15 digits of the first digit and the number is >= 1e-4, else
  // d.ddde±XX; a whole number keeps ".0" so it reads back as a float.
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  if (text[0] == '-') out += '-', text.remove_prefix(1);
  const size_t e_at = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e_at))
    if (c != '.') digits += c;
  int exp10 = 0;
  std::from_chars(text.data() + e_at + (text[e_at + 1] == '+' ? 2 : 1), text.data() + text.size(), exp10);
  const int len = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // the decimal point's place after the first digit
  constexpr int kMinExp = -4, kMaxExp = 15;
  if (len <= n && n <= kMaxExp) {
    out += digits;
    out.append(static_cast<size_t>(n - len), '0');
    out += ".0";
  } else if (0 < n && n <= kMaxExp) {
    out.append(digits, 0, static_cast<size_t>(n));
    out += '.';
    out.append(digits, static_cast<size_t>(n));
  } else if (kMinExp < n && n <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (len > 1) out += '.', out.append(digits, 1);
    out += exp10 < 0 ? "e-" : "e+";
    const int a = exp10 < 0 ? -exp10 : exp10;
    if (a < 10) out += '0';
    out += std::to_string(a);
  }
}

}  // namespace

void json_append_string(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD for a byte that starts no valid sequence
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void Json::dump_to(std::string& out) const { dump_to(out, -1, 0); }

void Json::dump_to(std::string& out, int indent, int level) const {
  // Before each element or member: a comma after the first, then a new line
  // and the indentation when pretty.
  const auto separate = [&](bool first, int at) {
    if (!first) out += ',';
    if (indent >= 0) out += '\n', out.append(static_cast<size_t>(indent) * static_cast<size_t>(at), ' ');
  };
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += u_.b ? "true" : "false"; break;
    case Type::Int: out += std::to_string(u_.i); break;
    case Type::Uint: out += std::to_string(u_.u); break;
    case Type::Double: append_double(out, u_.d); break;
    case Type::String: json_append_string(out, *u_.s); break;
    case Type::Array: {
      out += '[';
      bool first = true;
      for (const Json& v : *u_.a) {
        separate(first, level + 1);
        first = false;
        v.dump_to(out, indent, level + 1);
      }
      if (!first && indent >= 0) separate(true, level);
      out += ']';
      break;
    }
    case Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : *u_.o) {
        separate(first, level + 1);
        first = false;
        json_append_string(out, k);
        out += indent >= 0 ? ": " : ":";
        v.dump_to(out, indent, level + 1);
      }
      if (!first && indent >= 0) separate(true, level);
      out += '}';
      break;
    }
  }
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent < 0 ? 0 : indent, 0);
  return out;
}

// ---- reading ----

namespace {

class Parser {
 public:
  Parser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  Result<Json> run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
    Json v;
    if (!value(v, 0)) return failure();
    skip_space();
    if (pos_ != s_.size()) {
      fail("unexpected text after the value");
      return failure();
    }
    return v;
  }

 private:
  // "at byte N", and for text of several lines "at line L, column C (byte N)" (columns count bytes, from 1).
  Status failure() const {
    const std::string_view before = s_.substr(0, err_pos_);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    std::string where = "byte " + std::to_string(err_pos_);
    if (line > 1) {
      const size_t column = err_pos_ - before.rfind('\n');
      where = "line " + std::to_string(line) + ", column " + std::to_string(column) + " (" + where + ")";
    }
    return error(ErrorKind::InvalidArgument, "invalid JSON at " + where + ": " + err_);
  }
  bool fail(const char* what) {
    if (err_.empty()) err_ = what, err_pos_ = pos_;
    return false;
  }
  bool too_deep() {
    const std::string what = "nested deeper than " + std::to_string(max_depth_) + " levels (the limit here)";
    return fail(what.c_str());
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool value(Json& out, int depth) {
    skip_space();
    if (at_end()) return fail("unexpected end of input");
    switch (peek()) {
      case '{': return object(out, depth + 1);
      case '[': return array(out, depth + 1);
      case '"': {
        std::string str;
        if (!string(str)) return false;
        out = Json(std::move(str));
        return true;
      }
      case 't': out = true; return literal("true");
      case 'f': out = false; return literal("false");
      case 'n': out = nullptr; return literal("null");
      default: return number(out);
    }
  }

  bool array(Json& out, int depth) {
    if (depth > max_depth_) return too_deep();
    ++pos_;
    Json::Array a;
    skip_space();
    if (!at_end() && peek() == ']') {
      ++pos_;
      out = Json(std::move(a));
      return true;
    }
    for (;;) {
      a.emplace_back();
      if (!value(a.back(), depth)) return false;
      skip_space();
      if (at_end()) return fail("unexpected end of input in an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ']') return fail("expected ',' or ']'");
      ++pos_;
      out = Json(std::move(a));
      return true;
    }
  }

  bool object(Json& out, int depth) {
    if (depth > max_depth_) return too_deep();
    ++pos_;
    Json::Object o;
    skip_space();
    if (!at_end() && peek() == '}') {
      ++pos_;
      out = Json(std::move(o));
      return true;
    }
    for (;;) {
      skip_space();
      if (at_end() || peek() != '"') return fail("expected a string key");
      o.emplace_back();
      if (!string(o.back().first)) return false;
      skip_space();
      if (at_end() || peek() != ':') return fail("expected ':'");
      ++pos_;
      if (!value(o.back().second, depth)) return false;
      skip_space();
      if (at_end()) return fail("unexpected end of input in an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') return fail("expected ',' or '}'");
      ++pos_;
      out = Json(std::move(o));
      return true;
    }
  }

  // Four hex digits after "\u".
  bool hex4(uint32_t& cp) {
    if (pos_ + 4 > s_.size()) return fail("incomplete \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[pos_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') cp |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') cp |= static_cast<uint32_t>(c - 'A' + 10);
      else return --pos_, fail("invalid hex digit in a \\u escape");
    }
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // the opening quote
    for (;;) {
      // Copy the run up to the next quote, backslash, control or non-ASCII byte at once.
      const size_t start = pos_;
      while (pos_ < s_.size()) {
        const unsigned char c = static_cast<unsigned char>(s_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++pos_;
      }
      out.append(s_.data() + start, pos_ - start);
      if (at_end()) return fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("control character in a string (escape it)");
      if (c >= 0x80) {
        const size_t n = utf8_sequence(s_, pos_);
        if (n == 0) return fail("invalid UTF-8 in a string");
        out.append(s_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      ++pos_;  // the backslash
      if (at_end()) return fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a low surrogate without a high one");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (s_.substr(pos_, 2) != "\\u") return fail("a high surrogate without a low one");
            pos_ += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("a high surrogate without a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8::append(out, cp);
          break;
        }
        default: return --pos_, fail("invalid escape in a string");
      }
    }
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  bool number(Json& out) {
    const size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (at_end() || !digit(peek())) return fail(negative ? "expected a digit after '-'" : "expected a value");
    // Where the first non-zero digit stands relative to the decimal point, to tell an
    // overflow from an underflow when the value is out of a double's range.
    int64_t magnitude = 0;
    bool nonzero_seen = false;
    if (peek() == '0') {
      ++pos_;
    } else {
      while (!at_end() && digit(peek())) ++pos_, ++magnitude;
      nonzero_seen = true;
    }
    bool integer = true;
    if (!at_end() && peek() == '.') {
      integer = false;
      ++pos_;
      if (at_end() || !digit(peek())) return fail("expected a digit after '.'");
      while (!at_end() && digit(peek())) {
        if (!nonzero_seen && peek() != '0') nonzero_seen = true;
        else if (!nonzero_seen) --magnitude;
        ++pos_;
      }
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integer = false;
      ++pos_;
      bool exp_negative = false;
      if (!at_end() && (peek() == '+' || peek() == '-')) exp_negative = peek() == '-', ++pos_;
      if (at_end() || !digit(peek())) return fail("expected a digit in the exponent");
      int64_t e = 0;
      while (!at_end() && digit(peek())) {
        if (e < 1000000) e = e * 10 + (peek() - '0');
        ++pos_;
      }
      magnitude += exp_negative ? -e : e;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integer) {
      if (negative) {
        int64_t v;
        if (std::from_chars(first, last, v).ec == std::errc()) return out = v, true;
      } else {
        uint64_t v;
        if (std::from_chars(first, last, v).ec == std::errc()) return out = v, true;
      }
      // Too large for 64 bits: read as a double, as other JSON readers do.
    }
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      if (magnitude > 0) {
        pos_ = start;
        return fail("number out of range");
      }
      d = negative ? -0.0 : 0.0;  // underflow: closer to zero than any double
    } else if (r.ec != std::errc() || r.ptr != last) {
      pos_ = start;
      return fail("invalid number");
    }
    out = d;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int max_depth_;
  std::string err_;
  size_t err_pos_ = 0;
};

}  // namespace

Result<Json> Json::parse(std::string_view text, int max_depth) { return Parser(text, max_depth).run(); }

}  // namespace tern
