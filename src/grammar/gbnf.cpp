#include "grammar/gbnf.h"

#include <optional>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace tern::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<Grammar> run(std::string_view root) {
    skip_space(true);
    while (!at_end()) {
      const std::string name = parse_name();
      if (!err_.empty()) return fail();
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") return fail_at("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t r = b_.rule(name);
      if (b_.defined(r)) return fail_at("rule '" + name + "' is defined twice");
      parse_alternates(r, name, false);
      if (!err_.empty()) return fail();
      if (!at_end() && peek() != '\n' && peek() != '\r')
        return fail_at(std::string("unexpected '") + peek() + "' in rule '" + name + "'");
      skip_space(true);
    }
    return b_.finish(root);
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  std::string where() const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    return "grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
  }
  void set_error(const std::string& msg) {
    if (err_.empty()) err_ = where() + msg;
  }
  Status fail() const { return error(ErrorKind::InvalidArgument, err_); }
  Status fail_at(const std::string& msg) {
    set_error(msg);
    return fail();
  }

  // Spaces, tabs and comments; newlines too when `newline_ok`.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) set_error(at_end() ? "expected a rule name" : std::string("expected a rule name, found '") + peek() + "'");
    return std::string(s_.substr(start, pos_ - start));
  }

  // One code point of the grammar text (UTF-8 decoded), or an escape.
  std::optional<uint32_t> parse_char() {
    if (at_end()) {
      set_error("unexpected end of grammar");
      return std::nullopt;
    }
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default:
          --pos_;
          set_error(std::string("unknown escape '\\") + e + "'");
          return std::nullopt;
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + n > s_.size()) {
      set_error("the grammar is not valid UTF-8");
      return std::nullopt;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char d = static_cast<unsigned char>(s_[pos_ + i]);
      if ((d & 0xC0) != 0x80) {
        set_error("the grammar is not valid UTF-8");
        return std::nullopt;
      }
      cp = (cp << 6) | (d & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  std::optional<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) {
        set_error("expected " + std::to_string(digits) + " hex digits in an escape");
        return std::nullopt;
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
      set_error("an escape names a surrogate or a value past U+10FFFF, not a Unicode character");
      return std::nullopt;
    }
    return v;
  }

  void parse_literal(std::vector<Symbol>& out) {
    ++pos_;  // opening quote
    std::string bytes;
    while (err_.empty()) {
      if (at_end() || peek() == '\n') {
        set_error("unterminated string literal");
        return;
      }
      if (peek() == '"') {
        ++pos_;
        break;
      }
      const auto cp = parse_char();
      if (cp) utf8::append(bytes, *cp);
    }
    b_.literal(bytes, out);
  }

  std::optional<Symbol> parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    while (err_.empty()) {
      if (at_end() || peek() == '\n') {
        set_error("unterminated character class");
        return std::nullopt;
      }
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const auto lo = parse_char();
      if (!lo) return std::nullopt;
      uint32_t hi = *lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        const auto h = parse_char();
        if (!h) return std::nullopt;
        if (*h < *lo) {
          set_error("character range is backwards");
          return std::nullopt;
        }
        hi = *h;
      }
      ranges.push_back({*lo, hi});
    }
    if (!err_.empty()) return std::nullopt;
    return b_.char_class(std::move(ranges), negated);
  }

  bool parse_int(int& v) {
    const size_t start = pos_;
    v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) {
        set_error("repetition count is too large");
        return false;
      }
      ++pos_;
    }
    return pos_ > start;
  }

  // {m}, {m,}, {m,n}, {,n}
  bool parse_braces(int& min, int& max) {
    ++pos_;
    skip_space(true);
    min = 0;
    const bool has_min = parse_int(min);
    skip_space(true);
    if (peek() == '}') {
      if (!has_min) set_error("expected a count in {}");
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(true);
      if (!parse_int(max)) max = -1;
      skip_space(true);
      if (peek() != '}') set_error("expected '}'");
    } else {
      set_error("expected ',' or '}' in a repetition");
    }
    if (!err_.empty()) return false;
    ++pos_;
    return true;
  }

  void parse_sequence(const std::string& name, bool nested, std::vector<Symbol>& out) {
    size_t last = out.size();  // start of the last element, for postfix operators
    bool have_last = false;
    while (err_.empty() && !at_end()) {
      const char c = peek();
      if (c == '"') {
        last = out.size();
        parse_literal(out);
        have_last = true;
      } else if (c == '[') {
        last = out.size();
        if (auto s = parse_class()) out.push_back(*s);
        have_last = true;
      } else if (c == '.') {
        ++pos_;
        last = out.size();
        out.push_back(b_.char_class({{0, 0x10FFFF}}, false));
        have_last = true;
      } else if (is_name_char(c)) {
        last = out.size();
        out.push_back(b_.rule_ref(b_.rule(parse_name())));
        have_last = true;
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        const uint32_t g = b_.fresh_rule(name);
        parse_alternates(g, name, true);
        if (!err_.empty()) return;
        if (peek() != ')') {
          set_error("expected ')'");
          return;
        }
        ++pos_;
        last = out.size();
        out.push_back(b_.rule_ref(g));
        have_last = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) {
          set_error(std::string("'") + c + "' has nothing to repeat");
          return;
        }
        int min = 0, max = -1;
        if (c == '{') {
          if (!parse_braces(min, max)) return;
        } else {
          ++pos_;
          min = c == '+' ? 1 : 0;
          max = c == '?' ? 1 : -1;
        }
        std::vector<Symbol> body(out.begin() + static_cast<std::ptrdiff_t>(last), out.end());
        out.resize(last);
        auto rep = b_.repeat(std::move(body), min, max);
        if (!rep.is_ok()) {
          set_error(rep.status().message());
          return;
        }
        out.push_back(*rep);
      } else if (c == '<') {
        set_error("token references (<...>) are not supported");
        return;
      } else {
        break;  // '|', ')', end of line: the caller decides
      }
      skip_space(nested);
    }
  }

  void parse_alternates(uint32_t rule, const std::string& name, bool nested) {
    while (err_.empty()) {
      std::vector<Symbol> seq;
      parse_sequence(name, nested, seq);
      if (!err_.empty()) return;
      b_.add_alt(rule, std::move(seq));
      if (peek() != '|') return;
      ++pos_;
      skip_space(true);
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string err_;
  GrammarBuilder b_;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, std::string_view root) { return Parser(text).run(root); }

}  // namespace tern::grammar
