// Jinja lexer: splits a template into text and tags, tokenizes tag contents, and applies
// whitespace control. Hugging Face renders chat templates with trim_blocks and lstrip_blocks
// on, and the templates' newlines and indentation are written for that, so we do the same.
#include <cctype>
#include <charconv>
#include <cstring>

#include "core/utf8.h"
#include "tokenizer/jinja_ast.h"

namespace tern::jinja {
namespace {

enum class TagKind { Text, Expr, Stmt, Comment };

struct RawSegment {
  TagKind kind = TagKind::Text;
  std::string text;
  std::vector<Token> tokens;
  bool strip_before = false;  // "{{-", "{%-", "{#-"
  bool keep_before = false;   // "{%+": no lstrip_blocks for this tag
  bool strip_after = false;   // "-}}", "-%}", "-#}"
  int line = 0, column = 0;
};

Status lex_error(int line, int column, const std::string& message) {
  return error(ErrorKind::InvalidArgument,
               "chat template: line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                   message);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Result<std::vector<RawSegment>> run() {
    std::vector<RawSegment> out;
    while (pos_ < src_.size()) {
      size_t open = find_tag_open(pos_);
      if (open > pos_) {
        RawSegment text;
        text.line = line_;
        text.column = column_;
        text.text = std::string(src_.substr(pos_, open - pos_));
        advance_to(open);
        out.push_back(std::move(text));
      }
      if (pos_ >= src_.size()) break;
      RawSegment tag;
      Status s = lex_tag(tag);
      if (!s.is_ok()) return s;
      out.push_back(std::move(tag));
    }
    return out;
  }

 private:
  size_t find_tag_open(size_t from) const {
    for (size_t p = from; p + 1 < src_.size(); ++p) {
      if (src_[p] == '{' && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return src_.size();
  }

  void advance_to(size_t target) {
    while (pos_ < target) {
      if (src_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
      ++pos_;
    }
  }

  bool at(std::string_view s) const { return src_.substr(pos_, s.size()) == s; }

  Status lex_tag(RawSegment& tag) {
    tag.line = line_;
    tag.column = column_;
    char second = src_[pos_ + 1];
    tag.kind = second == '{' ? TagKind::Expr : second == '%' ? TagKind::Stmt : TagKind::Comment;
    advance_to(pos_ + 2);
    if (pos_ < src_.size() && src_[pos_] == '-') {
      tag.strip_before = true;
      advance_to(pos_ + 1);
    } else if (pos_ < src_.size() && src_[pos_] == '+') {
      tag.keep_before = true;
      advance_to(pos_ + 1);
    }
    if (tag.kind == TagKind::Comment) return lex_comment(tag);
    const std::string_view close = tag.kind == TagKind::Expr ? "}}" : "%}";
    int brace_depth = 0;  // "}}" closes a dict literal, not the tag, while braces are open
    Token end;            // placed where the closing delimiter starts, for error positions
    end.kind = TokenKind::End;
    for (;;) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) return lex_error(tag.line, tag.column, "unclosed tag");
      end.line = line_;
      end.column = column_;
      if (brace_depth == 0 && at("-") && src_.substr(pos_ + 1, 2) == close) {
        tag.strip_after = true;
        advance_to(pos_ + 3);
        break;
      }
      if (brace_depth == 0 && (at(close) || (at("+") && src_.substr(pos_ + 1, 2) == close))) {
        advance_to(pos_ + (at("+") ? 3 : 2));
        break;
      }
      Token tok;
      Status s = lex_token(tok, brace_depth);
      if (!s.is_ok()) return s;
      tag.tokens.push_back(std::move(tok));
    }
    tag.tokens.push_back(end);
    return Status::ok();
  }

  Status lex_comment(RawSegment& tag) {
    size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) return lex_error(tag.line, tag.column, "unclosed comment");
    tag.strip_after = end > pos_ && src_[end - 1] == '-';
    advance_to(end + 2);
    return Status::ok();
  }

  Status lex_token(Token& tok, int& brace_depth) {
    tok.line = line_;
    tok.column = column_;
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
      tok.kind = TokenKind::Name;
      tok.text = std::string(src_.substr(pos_, end - pos_));
      advance_to(end);
      return Status::ok();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(tok);
    if (c == '\'' || c == '"') return lex_string(tok);
    static constexpr const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                           "<",  ">",  "=",  "(",  ")",  "[",  "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOps) {
      if (at(op)) {
        tok.kind = TokenKind::Op;
        tok.text = op;
        if (tok.text == "(" || tok.text == "[" || tok.text == "{") ++brace_depth;
        if ((tok.text == ")" || tok.text == "]" || tok.text == "}") && brace_depth > 0) --brace_depth;
        advance_to(pos_ + std::strlen(op));
        return Status::ok();
      }
    }
    return lex_error(line_, column_, std::string("unexpected character '") + c + "'");
  }

  Status lex_number(Token& tok) {
    size_t end = pos_;
    while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        end = e;
        while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
      }
    }
    std::string text(src_.substr(pos_, end - pos_));
    if (is_float) {
      tok.kind = TokenKind::Float;
      tok.f = std::strtod(text.c_str(), nullptr);
    } else {
      tok.kind = TokenKind::Int;
      auto r = std::from_chars(text.data(), text.data() + text.size(), tok.i);
      if (r.ec != std::errc()) return lex_error(line_, column_, "integer literal too large");
    }
    tok.text = std::move(text);
    advance_to(end);
    return Status::ok();
  }

  // Python string literal escapes; an unknown escape keeps its backslash, as Python does.
  Status lex_string(Token& tok) {
    const char quote = src_[pos_];
    const int line = line_, column = column_;
    size_t p = pos_ + 1;
    std::string out;
    while (p < src_.size() && src_[p] != quote) {
      char c = src_[p];
      if (c != '\\' || p + 1 >= src_.size()) {
        out += c;
        ++p;
        continue;
      }
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = p + k < src_.size() ? hex_value(src_[p + k]) : -1;
            if (h < 0) return lex_error(line, column, "bad \\" + std::string(1, e) + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) return lex_error(line, column, "escape out of Unicode range");
          utf8::append(out, cp);
          p += n;
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    if (p >= src_.size()) return lex_error(line, column, "unterminated string literal");
    tok.kind = TokenKind::String;
    tok.text = std::move(out);
    advance_to(p + 1);
    return Status::ok();
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Whitespace control on one text segment between `prev` and `next` tags (either may be null).
// `line_starting` says the text begins a line (start of template, or the tag before it ate a
// newline), which lstrip_blocks needs when the text holds no newline of its own.
void control_whitespace(std::string& text, const RawSegment* prev, const RawSegment* next) {
  bool line_starting = prev == nullptr;
  if (prev != nullptr && prev->strip_after) {
    size_t n = 0;
    while (n < text.size() && is_space(text[n])) ++n;
    line_starting = n > 0 && text[n - 1] == '\n';
    text.erase(0, n);
  } else if (prev != nullptr && prev->kind != TagKind::Expr) {  // trim_blocks
    if (text.rfind("\r\n", 0) == 0) {
      text.erase(0, 2);
      line_starting = true;
    } else if (!text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      line_starting = true;
    }
  }
  if (next == nullptr) return;
  if (next->strip_before) {
    size_t n = text.size();
    while (n > 0 && is_space(text[n - 1])) --n;
    text.resize(n);
  } else if (next->kind != TagKind::Expr && !next->keep_before) {  // lstrip_blocks
    size_t line_start = text.rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting) return;
    for (size_t k = line_start; k < text.size(); ++k) {
      if (text[k] != ' ' && text[k] != '\t') return;
    }
    text.resize(line_start);
  }
}

}  // namespace

Result<std::vector<Segment>> lex_template(std::string_view source) {
  auto raw = Lexer(source).run();
  if (!raw.is_ok()) return raw.status();
  std::vector<RawSegment>& segs = raw.value();
  // A tag with no text after it still strips/trims nothing; only text segments change.
  for (size_t k = 0; k < segs.size(); ++k) {
    if (segs[k].kind != TagKind::Text) continue;
    const RawSegment* prev = k > 0 ? &segs[k - 1] : nullptr;
    const RawSegment* next = k + 1 < segs.size() ? &segs[k + 1] : nullptr;
    control_whitespace(segs[k].text, prev, next);
  }
  std::vector<Segment> out;
  for (RawSegment& r : segs) {
    if (r.kind == TagKind::Comment) continue;
    if (r.kind == TagKind::Text && r.text.empty()) continue;
    Segment s;
    s.kind = r.kind == TagKind::Text ? SegmentKind::Text : r.kind == TagKind::Expr ? SegmentKind::Expr : SegmentKind::Stmt;
    s.text = std::move(r.text);
    s.tokens = std::move(r.tokens);
    s.line = r.line;
    s.column = r.column;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tern::jinja
