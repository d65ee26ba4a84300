#include "grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <vector>

#include "grammar/grammar.h"
#include "core/utf8.h"

namespace tern::grammar {

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;  // UTF-8 bytes pass through: the GBNF parser decodes them
    }
  }
  return out + "\"";
}

namespace {

using Ranges = std::vector<CodeRange>;

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  Ranges out;
  uint32_t next = 0;
  for (const CodeRange& x : r) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = std::max(next, x.hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const Ranges kDigit{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's \s: WhiteSpace and LineTerminator.
const Ranges kSpace{{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};

std::string class_char(uint32_t cp) {
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return std::string(1, static_cast<char>(cp));
  char buf[16];
  if (cp < 0x10000)
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

std::string gbnf_class(const Ranges& r, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const CodeRange& x : r) {
    out += class_char(x.lo);
    if (x.hi != x.lo) out += "-" + class_char(x.hi);
  }
  return out + "]";
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [cp](const CodeRange& x) { return x.lo <= cp && cp <= x.hi; });
}

// Inside a JSON string, ", \ and U+0000..U+001F appear only escaped: the
// class without them, or'ed with the escapes of those it held.
std::string json_class(const Ranges& r, bool negated) {
  const Ranges eff = negated ? complement(r) : r;
  Ranges plain = complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  Ranges kept;
  for (const CodeRange& x : eff)
    for (const CodeRange& y : plain) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) kept.push_back({lo, hi});
    }
  std::vector<std::string> alts;
  if (!kept.empty()) alts.push_back(gbnf_class(kept, false));
  if (contains(eff, '"')) alts.push_back(R"("\\\"")");
  if (contains(eff, '\\')) alts.push_back(R"("\\\\")");
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!contains(eff, c)) continue;
    char buf[16];
    std::snprintf(buf, sizeof buf, "\"\\\\u%04X\"", c);
    alts.push_back(buf);
  }
  if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // nothing: the grammar builder reports an empty class
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class RegexParser {
 public:
  RegexParser(std::string_view re, bool json) : s_(re), json_(json) {}

  Result<std::string> run() {
    if (peek() == '^') ++pos_;
    std::string e = alternation(0);
    if (err_.empty() && pos_ < s_.size()) set_error(s_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    if (!err_.empty()) return error(ErrorKind::InvalidArgument, "regex at offset " + std::to_string(err_pos_) + ": " + err_);
    return e;
  }

 private:
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }
  void set_error(const std::string& m) {
    if (err_.empty()) err_ = m, err_pos_ = pos_;
  }

  std::string alternation(int depth) {
    if (depth > 200) {
      set_error("groups nest too deeply");
      return {};
    }
    std::vector<std::string> alts{sequence(depth)};
    while (err_.empty() && peek() == '|') {
      ++pos_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  std::string sequence(int depth) {
    std::string out;
    while (err_.empty() && !at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        // An end anchor is implied; one is only accepted where it says that.
        if (depth > 0 || (pos_ + 1 < s_.size() && s_[pos_ + 1] != '|')) {
          set_error("'$' is supported only at the end of the pattern");
          return {};
        }
        ++pos_;
        continue;
      }
      std::string atom = parse_atom(depth);
      if (!err_.empty()) return {};
      atom = quantified(atom);
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantified(const std::string& atom) {
    int min = 1, max = 1;
    const char c = peek();
    if (c == '*') min = 0, max = -1, ++pos_;
    else if (c == '+') min = 1, max = -1, ++pos_;
    else if (c == '?') min = 0, max = 1, ++pos_;
    else if (c == '{' && braces(min, max)) {}
    else return atom;
    if (peek() == '?') ++pos_;  // lazy: matches the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && std::isdigit(static_cast<unsigned char>(peek(1))))) {
      set_error("a quantifier follows a quantifier");
      return {};
    }
    if (min == 0 && max == -1) return "(" + atom + ")*";
    if (min == 1 && max == -1) return "(" + atom + ")+";
    if (min == 0 && max == 1) return "(" + atom + ")?";
    if (max == -1) return "(" + atom + "){" + std::to_string(min) + ",}";
    if (min == max) return "(" + atom + "){" + std::to_string(min) + "}";
    return "(" + atom + "){" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  // {m}, {m,}, {m,n}; false (nothing consumed) when it is not a quantifier.
  bool braces(int& min, int& max) {
    size_t p = pos_ + 1;
    auto number = [&](int& v) {
      const size_t start = p;
      v = 0;
      while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p])) && v <= 100000) v = v * 10 + (s_[p++] - '0');
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < s_.size() && s_[p] == ',') {
      ++p;
      if (!number(max)) max = -1;
    }
    if (p >= s_.size() || s_[p] != '}') return false;
    if (min > 100000 || max > 100000) {
      set_error("repetition count is too large");
      return false;
    }
    if (max >= 0 && max < min) {
      set_error("repetition {m,n} has n below m");
      return false;
    }
    pos_ = p + 1;
    return true;
  }

  std::optional<uint32_t> code_point() {
    const unsigned char c = static_cast<unsigned char>(peek());
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + n > s_.size()) {
      set_error("the pattern is not valid UTF-8");
      return std::nullopt;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  std::optional<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) {
        set_error("bad hex escape");
        return std::nullopt;
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a class escape (into `cls`, returns true) or one
  // code point (into `cp`).
  bool escape(Ranges& cls, bool& negated_cls, uint32_t& cp) {
    const char e = peek();
    ++pos_;
    negated_cls = false;
    switch (e) {
      case 'd': cls = kDigit; return true;
      case 'w': cls = kWord; return true;
      case 's': cls = kSpace; return true;
      case 'D': cls = kDigit, negated_cls = true; return true;
      case 'W': cls = kWord, negated_cls = true; return true;
      case 'S': cls = kSpace, negated_cls = true; return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': if (auto v = hex(2)) cp = *v; return false;
      case 'u': if (auto v = hex(4)) cp = *v; return false;
      case 'b': case 'B': set_error("word boundaries (\\b, \\B) are not supported"); return false;
      case 'k': set_error("backreferences are not supported"); return false;
      default:
        if (e >= '1' && e <= '9') {
          set_error("backreferences are not supported");
          return false;
        }
        if (std::isalnum(static_cast<unsigned char>(e))) {
          set_error(std::string("unknown escape \\") + e);
          return false;
        }
        cp = static_cast<unsigned char>(e);  // escaped punctuation is itself
        return false;
    }
  }

  std::string parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') negated = true, ++pos_;
    Ranges ranges;
    while (err_.empty()) {
      if (at_end()) {
        set_error("unterminated character class");
        return {};
      }
      if (peek() == ']') {  // ECMAScript: ']' always closes; "[]" is empty
        ++pos_;
        break;
      }
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        Ranges cls;
        bool neg = false;
        if (escape(cls, neg, lo)) {
          const Ranges add = neg ? complement(cls) : cls;
          ranges.insert(ranges.end(), add.begin(), add.end());
          continue;
        }
      } else {
        auto cp = code_point();
        if (!cp) return {};
        lo = *cp;
      }
      if (!err_.empty()) return {};
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          Ranges cls;
          bool neg = false;
          if (escape(cls, neg, hi)) {
            set_error("a class escape cannot end a range");
            return {};
          }
        } else {
          auto cp = code_point();
          if (!cp) return {};
          hi = *cp;
        }
        if (hi < lo) {
          set_error("character range is backwards");
          return {};
        }
      }
      ranges.push_back({lo, hi});
    }
    if (ranges.empty()) {
      if (negated) return cls({{0, 0x10FFFF}}, false);  // [^] is any character
      set_error("empty character class matches nothing");
      return {};
    }
    return cls(ranges, negated);
  }

  std::string parse_atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (peek(1) == ':') {
          pos_ += 2;
        } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
          pos_ += 2;  // a named group: capture names do not change what matches
          while (!at_end() && peek() != '>') ++pos_;
          ++pos_;
        } else {
          set_error("lookaround and other (?...) groups are not supported");
          return {};
        }
      }
      std::string inner = alternation(depth + 1);
      if (!err_.empty()) return {};
      if (peek() != ')') {
        set_error("missing ')'");
        return {};
      }
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return cls({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true);
    }
    if (c == '^') {
      set_error("'^' is supported only at the start of the pattern");
      return {};
    }
    if (c == '*' || c == '+' || c == '?') {
      set_error("nothing to repeat");
      return {};
    }
    uint32_t cp = 0;
    if (c == '\\') {
      ++pos_;
      if (at_end()) {
        set_error("the pattern ends with a backslash");
        return {};
      }
      Ranges cls;
      bool neg = false;
      if (escape(cls, neg, cp)) return this->cls(cls, neg);
      if (!err_.empty()) return {};
    } else {
      auto v = code_point();
      if (!v) return {};
      cp = *v;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      set_error("escape is not a Unicode character");
      return {};
    }
    if (json_ && (cp < 0x20 || cp == '"' || cp == '\\')) return cls({{cp, cp}}, false);
    std::string utf8;
    utf8::append(utf8, cp);
    return gbnf_literal(utf8);
  }

  std::string cls(const Ranges& r, bool negated) const { return json_ ? json_class(r, negated) : gbnf_class(r, negated); }

  std::string_view s_;
  bool json_ = false;
  size_t pos_ = 0;
  std::string err_;
  size_t err_pos_ = 0;
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view regex, bool json_string) {
  return RegexParser(regex, json_string).run();
}

}  // namespace tern::grammar
