// Jinja parser: segments -> Program. Operator precedence follows Jinja2's parser, which
// differs from Python in ways templates rely on: filters (`|`) and tests (`is`) bind tighter
// than every binary operator, so `'a' + x | trim + 'b'` trims x alone and `not x is none`
// is `not (x is none)`.
#include <algorithm>
#include <array>

#include "tokenizer/jinja_ast.h"

namespace tern::jinja {
namespace {

constexpr int kMaxParseDepth = 128;  // nested expressions and blocks; keeps recursion bounded

// Filters and tests the evaluator implements; unknown names are rejected at parse time so a
// template we cannot render fails when it is loaded, not on some later request.
constexpr std::array<std::string_view, 27> kFilters = {
    "trim",  "length",     "count",      "upper",  "lower",  "tojson", "default", "d",       "first",
    "last",  "string",     "join",       "items",  "list",   "title",  "capitalize", "replace", "int",
    "float", "abs",        "selectattr", "rejectattr", "select", "reject", "map",  "safe",    "unique"};
constexpr std::array<std::string_view, 24> kTests = {
    "defined", "undefined", "none",  "string", "number",   "integer",  "float", "boolean",
    "mapping", "iterable",  "sequence", "callable", "odd", "even", "divisibleby", "equalto",
    "eq",      "ne",        "true",  "false",  "lower",    "upper",    "in",    "sameas"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

class Parser {
 public:
  explicit Parser(std::vector<Segment> segments) : segs_(std::move(segments)) {}

  Result<Program> run() {
    Program program;
    std::string stop = parse_body(program.body, {});
    if (!error_.is_ok()) return error_;
    if (!stop.empty()) {
      fail_at(segs_[seg_].line, segs_[seg_].column, "unexpected '" + stop + "'");
      return error_;
    }
    return program;
  }

 private:
  // ---- errors ----
  void fail_at(int line, int column, const std::string& message) {
    if (error_.is_ok()) {
      error_ = error(ErrorKind::InvalidArgument, "chat template: line " + std::to_string(line) + ", column " +
                                                     std::to_string(column) + ": " + message);
    }
  }
  std::nullptr_t fail(const std::string& message) {
    fail_at(cur().line, cur().column, message);
    return nullptr;
  }
  bool ok() const { return error_.is_ok(); }

  // ---- token cursor within the current tag ----
  const Token& cur() const { return (*toks_)[pos_]; }
  const Token& peek(size_t k) const { return (*toks_)[std::min(pos_ + k, toks_->size() - 1)]; }
  bool is_op(std::string_view op) const { return cur().kind == TokenKind::Op && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().kind == TokenKind::Name && cur().text == name; }
  void next() {
    if (cur().kind != TokenKind::End) ++pos_;
  }
  bool expect_op(std::string_view op) {
    if (!is_op(op)) {
      fail("expected '" + std::string(op) + "'");
      return false;
    }
    next();
    return true;
  }
  bool expect_end() {
    if (cur().kind != TokenKind::End) {
      fail("unexpected '" + cur().text + "' before the end of the tag");
      return false;
    }
    return true;
  }
  ExprPtr make(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) { ++p->depth_; }
    ~DepthGuard() { --p->depth_; }
    bool too_deep() const { return p->depth_ > kMaxParseDepth; }
  };

  // ---- statements ----

  // Appends nodes to `out` until EOF or a statement whose keyword is in `stops`; returns that
  // keyword (its tag stays current) or "" at EOF.
  std::string parse_body(Body& out, std::initializer_list<std::string_view> stops) {
    DepthGuard guard(this);
    if (guard.too_deep()) {
      fail_at(seg_ < segs_.size() ? segs_[seg_].line : 0, 0, "blocks nested too deeply");
      return "";
    }
    while (ok() && seg_ < segs_.size()) {
      Segment& seg = segs_[seg_];
      if (seg.kind == SegmentKind::Text) {
        auto node = make_node(NodeKind::Text, seg);
        node->text = std::move(seg.text);
        out.push_back(std::move(node));
        ++seg_;
        continue;
      }
      toks_ = &seg.tokens;
      pos_ = 0;
      if (seg.kind == SegmentKind::Expr) {
        auto node = make_node(NodeKind::Output, seg);
        node->expr = parse_expression(true);
        if (ok() && expect_end()) out.push_back(std::move(node));
        ++seg_;
        continue;
      }
      if (cur().kind != TokenKind::Name) {
        fail("expected a statement keyword");
        return "";
      }
      const Token keyword_token = cur();
      const std::string& keyword = keyword_token.text;
      if (std::find(stops.begin(), stops.end(), keyword) != stops.end()) return keyword;
      next();
      if (keyword == "if") {
        parse_if(out, seg);
      } else if (keyword == "for") {
        parse_for(out, seg);
      } else if (keyword == "set") {
        parse_set(out, seg);
      } else if (keyword == "generation") {
        parse_wrapped(out, seg, NodeKind::Block, "generation", "endgeneration");
      } else if (keyword == "macro") {
        parse_macro(out, seg);
      } else if (keyword == "call") {
        parse_call_block(out, seg);
      } else if (keyword == "filter") {
        parse_filter_block(out, seg);
      } else if (keyword == "break" || keyword == "continue") {
        if (loop_depth_ == 0) {
          fail("'" + keyword + "' outside a loop");
          return "";
        }
        auto node = make_node(keyword == "break" ? NodeKind::Break : NodeKind::Continue, seg);
        if (expect_end()) out.push_back(std::move(node));
        ++seg_;
      } else if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
        fail_at(keyword_token.line, keyword_token.column, "unexpected '" + keyword + "'");
      } else {
        fail_at(keyword_token.line, keyword_token.column, "unsupported tag '" + keyword + "'");
      }
    }
    return "";
  }

  NodePtr make_node(NodeKind kind, const Segment& seg) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = seg.line;
    n->column = seg.column;
    return n;
  }

  // Consumes the current statement tag, which must be exactly `keyword`.
  void close_tag() {
    next();
    if (expect_end()) ++seg_;
  }

  // Parses the body after a block's opening tag; fails if EOF comes before a stop keyword.
  std::string parse_block_body(Body& out, std::initializer_list<std::string_view> stops, const Node& opener,
                               const char* what) {
    std::string stop = parse_body(out, stops);
    if (ok() && stop.empty()) {
      fail_at(opener.line, opener.column, std::string("unclosed '") + what + "'");
    }
    return stop;
  }

  void parse_if(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::If, seg);
    node->conditions.push_back(parse_expression(true));
    if (!ok() || !expect_end()) return;
    ++seg_;
    for (;;) {
      node->bodies.emplace_back();
      std::string stop = parse_block_body(node->bodies.back(), {"elif", "else", "endif"}, *node, "if");
      if (!ok()) return;
      toks_ = &segs_[seg_].tokens;
      pos_ = 0;
      next();
      if (stop == "elif") {
        if (node->bodies.size() > node->conditions.size()) {
          fail("'elif' after 'else'");
          return;
        }
        node->conditions.push_back(parse_expression(true));
        if (!ok() || !expect_end()) return;
        ++seg_;
      } else if (stop == "else") {
        if (node->bodies.size() > node->conditions.size()) {
          fail("second 'else' in one 'if'");
          return;
        }
        if (!expect_end()) return;
        ++seg_;
      } else {  // endif
        if (!expect_end()) return;
        ++seg_;
        break;
      }
    }
    out.push_back(std::move(node));
  }

  void parse_for(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::For, seg);
    for (;;) {
      if (cur().kind != TokenKind::Name) {
        fail("expected a loop variable name");
        return;
      }
      node->targets.push_back(cur().text);
      next();
      if (!is_op(",")) break;
      next();
    }
    if (!is_name("in")) {
      fail("expected 'in'");
      return;
    }
    next();
    node->expr = parse_expression(false);  // no ternary: `if` here starts the loop filter
    if (!ok()) return;
    if (is_name("if")) {
      next();
      node->filter = parse_expression(true);
      if (!ok()) return;
    }
    if (is_name("recursive")) {
      fail("recursive loops are not supported");
      return;
    }
    if (!expect_end()) return;
    ++seg_;
    ++loop_depth_;
    node->bodies.emplace_back();
    std::string stop = parse_block_body(node->bodies.back(), {"else", "endfor"}, *node, "for");
    --loop_depth_;
    if (!ok()) return;
    toks_ = &segs_[seg_].tokens;
    pos_ = 0;
    if (stop == "else") {
      close_tag();
      if (!ok()) return;
      node->bodies.emplace_back();
      stop = parse_block_body(node->bodies.back(), {"endfor"}, *node, "for");
      if (!ok()) return;
      toks_ = &segs_[seg_].tokens;
      pos_ = 0;
    }
    close_tag();
    if (ok()) out.push_back(std::move(node));
  }

  void parse_set(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::Set, seg);
    if (cur().kind != TokenKind::Name) {
      fail("expected a variable name after 'set'");
      return;
    }
    node->targets.push_back(cur().text);
    next();
    if (is_op(".")) {
      next();
      if (cur().kind != TokenKind::Name) {
        fail("expected an attribute name");
        return;
      }
      node->attr = cur().text;
      next();
    }
    if (is_op(",")) {
      fail("tuple assignment in 'set' is not supported");
      return;
    }
    if (!is_op("=")) {
      // {% set x %}...{% endset %}: x is the body's text.
      if (!node->attr.empty()) {
        fail("a block 'set' takes a plain variable name");
        return;
      }
      node->kind = NodeKind::SetBlock;
      finish_block(out, std::move(node), "endset", "set");
      return;
    }
    next();
    node->expr = parse_expression(true);
    if (!ok() || !expect_end()) return;
    ++seg_;
    out.push_back(std::move(node));
  }

  // A tag with no arguments around a body: {% generation %}...{% endgeneration %}.
  void parse_wrapped(Body& out, const Segment& seg, NodeKind kind, const char* what, const char* end) {
    finish_block(out, make_node(kind, seg), end, what);
  }

  // The rest of a block whose opening tag has been read up to its end: the end of the tag, one
  // body up to `end`, the end tag; then the node joins `out`.
  void finish_block(Body& out, NodePtr node, const char* end, const char* what) {
    if (!expect_end()) return;
    ++seg_;
    node->bodies.emplace_back();
    parse_block_body(node->bodies.back(), {end}, *node, what);
    if (!ok()) return;
    toks_ = &segs_[seg_].tokens;
    pos_ = 0;
    close_tag();
    if (ok()) out.push_back(std::move(node));
  }

  void parse_macro(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::Macro, seg);
    if (cur().kind != TokenKind::Name) {
      fail("expected a macro name");
      return;
    }
    node->targets.push_back(cur().text);
    next();
    if (!expect_op("(")) return;
    while (ok() && !is_op(")")) {
      if (cur().kind != TokenKind::Name) {
        fail("expected a parameter name");
        return;
      }
      std::string name = cur().text;
      next();
      ExprPtr fallback;
      if (is_op("=")) {
        next();
        fallback = parse_expression(true);
      } else if (!node->params.empty() && node->params.back().second) {
        fail("a parameter without a default after one with a default");
        return;
      }
      node->params.emplace_back(std::move(name), std::move(fallback));
      if (!ok() || !is_op(",")) break;
      next();
    }
    if (!ok() || !expect_op(")")) return;
    const int loops = loop_depth_;
    loop_depth_ = 0;  // a macro's body is not inside the loops around its definition
    finish_block(out, std::move(node), "endmacro", "macro");
    loop_depth_ = loops;
  }

  void parse_call_block(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::CallBlock, seg);
    if (is_op("(")) {
      fail("call blocks with caller arguments are not supported");
      return;
    }
    node->expr = parse_expression(false);
    if (!ok()) return;
    if (node->expr->kind != ExprKind::Call) {
      fail("'call' needs a macro call, as in {% call name(...) %}");
      return;
    }
    finish_block(out, std::move(node), "endcall", "call");
  }

  void parse_filter_block(Body& out, const Segment& seg) {
    auto node = make_node(NodeKind::FilterBlock, seg);
    // The filters apply to the body's text, which stands in as a literal placeholder.
    auto placeholder = make(ExprKind::Literal, cur());
    placeholder->literal = Value::of_string("");
    std::vector<Token>& toks = segs_[seg_].tokens;
    Token bar;
    bar.kind = TokenKind::Op;
    bar.text = "|";
    bar.line = cur().line;
    bar.column = cur().column;
    toks.insert(toks.begin() + static_cast<long>(pos_), bar);  // parse "| name(args) | ..." as filters
    node->expr = parse_filters(std::move(placeholder));
    if (!ok()) return;
    const Expr* f = node->expr.get();
    while (f->kind == ExprKind::Filter) f = f->args[0].get();
    if (f->kind != ExprKind::Literal || f == node->expr.get()) {
      fail("'filter' takes filters only, as in {% filter upper %}");
      return;
    }
    finish_block(out, std::move(node), "endfilter", "filter");
  }

  // ---- expressions ----

  ExprPtr parse_expression(bool with_ternary) {
    DepthGuard guard(this);
    if (guard.too_deep()) return fail("expression nested too deeply");
    const Token start = cur();
    ExprPtr e = parse_or();
    if (!ok() || !with_ternary || !is_name("if")) return e;
    next();
    auto t = make(ExprKind::Ternary, start);
    t->args.push_back(std::move(e));
    t->args.push_back(parse_or());
    if (!ok()) return nullptr;
    if (is_name("else")) {
      next();
      t->args.push_back(parse_expression(true));
    } else {
      t->args.push_back(nullptr);
    }
    return ok() ? std::move(t) : nullptr;
  }

  ExprPtr binary(ExprPtr lhs, std::string op, ExprPtr rhs, const Token& at) {
    if (!ok()) return nullptr;
    auto e = make(ExprKind::Binary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(rhs));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (ok() && is_name("or")) {
      Token at = cur();
      next();
      e = binary(std::move(e), "or", parse_and(), at);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (ok() && is_name("and")) {
      Token at = cur();
      next();
      e = binary(std::move(e), "and", parse_not(), at);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(this);
      if (guard.too_deep()) return fail("expression nested too deeply");
      Token at = cur();
      next();
      auto e = make(ExprKind::Unary, at);
      e->name = "not";
      e->args.push_back(parse_not());
      return ok() ? std::move(e) : nullptr;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (ok()) {
      Token at = cur();
      if (cur().kind == TokenKind::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        std::string op = cur().text;
        next();
        e = binary(std::move(e), op, parse_math1(), at);
      } else if (is_name("in")) {
        next();
        e = binary(std::move(e), "in", parse_math1(), at);
      } else if (is_name("not") && peek(1).kind == TokenKind::Name && peek(1).text == "in") {
        next();
        next();
        e = binary(std::move(e), "not in", parse_math1(), at);
      } else {
        break;
      }
    }
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (ok() && (is_op("+") || is_op("-"))) {
      Token at = cur();
      next();
      e = binary(std::move(e), at.text, parse_concat(), at);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (ok() && is_op("~")) {
      Token at = cur();
      next();
      e = binary(std::move(e), "~", parse_math2(), at);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (ok() && (is_op("*") || is_op("/") || is_op("//") || is_op("%"))) {
      Token at = cur();
      next();
      e = binary(std::move(e), at.text, parse_pow(), at);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (ok() && is_op("**")) {
      Token at = cur();
      next();
      e = binary(std::move(e), "**", parse_unary(true), at);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this);
    if (guard.too_deep()) return fail("expression nested too deeply");
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Token at = cur();
      next();
      e = make(ExprKind::Unary, at);
      e->name = at.text;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    if (ok()) e = parse_postfix(std::move(e));
    if (ok() && with_filter) e = parse_filters(std::move(e));
    return ok() ? std::move(e) : nullptr;
  }

  ExprPtr parse_primary() {
    const Token at = cur();
    if (at.kind == TokenKind::Name) {
      next();
      const std::string& n = at.text;
      auto lit = make(ExprKind::Literal, at);
      if (n == "true" || n == "True") {
        lit->literal = Value::of_bool(true);
      } else if (n == "false" || n == "False") {
        lit->literal = Value::of_bool(false);
      } else if (n == "none" || n == "None") {
        lit->literal = Value::none();
      } else {
        auto name = make(ExprKind::Name, at);
        name->name = n;
        return name;
      }
      return lit;
    }
    if (at.kind == TokenKind::String) {
      std::string s;
      while (cur().kind == TokenKind::String) {  // adjacent literals concatenate, as in Python
        s += cur().text;
        next();
      }
      auto lit = make(ExprKind::Literal, at);
      lit->literal = Value::of_string(std::move(s));
      return lit;
    }
    if (at.kind == TokenKind::Int || at.kind == TokenKind::Float) {
      next();
      auto lit = make(ExprKind::Literal, at);
      lit->literal = at.kind == TokenKind::Int ? Value::of_int(at.i) : Value::of_float(at.f);
      return lit;
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {  // empty tuple
        next();
        return make(ExprKind::ListLit, at);
      }
      ExprPtr first = parse_expression(true);
      if (!ok()) return nullptr;
      if (!is_op(",")) return expect_op(")") ? std::move(first) : nullptr;
      auto tuple = make(ExprKind::ListLit, at);  // tuples behave as lists here
      tuple->args.push_back(std::move(first));
      while (ok() && is_op(",")) {
        next();
        if (is_op(")")) break;
        tuple->args.push_back(parse_expression(true));
      }
      return ok() && expect_op(")") ? std::move(tuple) : nullptr;
    }
    if (is_op("[")) {
      next();
      auto list = make(ExprKind::ListLit, at);
      while (ok() && !is_op("]")) {
        list->args.push_back(parse_expression(true));
        if (!ok() || !is_op(",")) break;
        next();
      }
      return ok() && expect_op("]") ? std::move(list) : nullptr;
    }
    if (is_op("{")) {
      next();
      auto dict = make(ExprKind::DictLit, at);
      while (ok() && !is_op("}")) {
        dict->args.push_back(parse_expression(true));
        if (!ok() || !expect_op(":")) return nullptr;
        dict->args.push_back(parse_expression(true));
        if (!ok() || !is_op(",")) break;
        next();
      }
      return ok() && expect_op("}") ? std::move(dict) : nullptr;
    }
    if (at.kind == TokenKind::End) return fail("expected an expression");
    return fail("unexpected '" + at.text + "'");
  }

  // `( args )` after a callee; the opening parenthesis is current.
  bool parse_call_args(Expr& call) {
    next();
    while (ok() && !is_op(")")) {
      if (cur().kind == TokenKind::Name && peek(1).kind == TokenKind::Op && peek(1).text == "=") {
        std::string key = cur().text;
        next();
        next();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) {
          fail("positional argument after a keyword argument");
          return false;
        }
        call.args.push_back(parse_expression(true));
      }
      if (!ok() || !is_op(",")) break;
      next();
    }
    return ok() && expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (ok()) {
      const Token at = cur();
      if (is_op(".")) {
        next();
        if (cur().kind == TokenKind::Int) {  // x.0 is x[0]
          auto item = make(ExprKind::GetItem, at);
          auto index = make(ExprKind::Literal, cur());
          index->literal = Value::of_int(cur().i);
          next();
          item->args.push_back(std::move(e));
          item->args.push_back(std::move(index));
          e = std::move(item);
          continue;
        }
        if (cur().kind != TokenKind::Name) return fail("expected an attribute name after '.'");
        std::string attr = cur().text;
        next();
        if (is_op("(")) {
          auto call = make(ExprKind::MethodCall, at);
          call->name = std::move(attr);
          call->args.push_back(std::move(e));
          if (!parse_call_args(*call)) return nullptr;
          e = std::move(call);
        } else {
          auto get = make(ExprKind::GetAttr, at);
          get->name = std::move(attr);
          get->args.push_back(std::move(e));
          e = std::move(get);
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        if (e->kind != ExprKind::Name) return fail("only named functions and methods can be called");
        auto call = make(ExprKind::Call, at);
        call->name = e->name;
        if (!parse_call_args(*call)) return nullptr;
        e = std::move(call);
      } else {
        break;
      }
    }
    return ok() ? std::move(e) : nullptr;
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token at = cur();
    next();
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!ok()) return nullptr;
      if (is_op("]")) {
        next();
        auto item = make(ExprKind::GetItem, at);
        item->args.push_back(std::move(obj));
        item->args.push_back(std::move(start));
        return item;
      }
    }
    auto slice = make(ExprKind::Slice, at);
    slice->args.push_back(std::move(obj));
    slice->args.push_back(std::move(start));
    if (!expect_op(":")) return nullptr;
    slice->args.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression(true));
    if (ok() && is_op(":")) {
      next();
      slice->args.push_back(is_op("]") ? nullptr : parse_expression(true));
    } else {
      slice->args.push_back(nullptr);
    }
    return ok() && expect_op("]") ? std::move(slice) : nullptr;
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (ok()) {
      const Token at = cur();
      if (is_op("|")) {
        next();
        if (cur().kind != TokenKind::Name) return fail("expected a filter name after '|'");
        if (!contains(kFilters, cur().text)) return fail("unsupported filter '" + cur().text + "'");
        auto f = make(ExprKind::Filter, at);
        f->name = cur().text;
        f->args.push_back(std::move(e));
        next();
        if (is_op("(") && !parse_call_args(*f)) return nullptr;
        e = std::move(f);
      } else if (is_name("is")) {
        next();
        auto t = make(ExprKind::Test, at);
        if (is_name("not")) {
          t->negated = true;
          next();
        }
        if (cur().kind != TokenKind::Name) return fail("expected a test name after 'is'");
        // `none`, `true` and `false` are test names here, not literals.
        if (!contains(kTests, cur().text)) return fail("unsupported test '" + cur().text + "'");
        t->name = cur().text;
        t->args.push_back(std::move(e));
        next();
        if (is_op("(")) {
          if (!parse_call_args(*t)) return nullptr;
        } else if (cur().kind == TokenKind::String || cur().kind == TokenKind::Int ||
                   cur().kind == TokenKind::Float) {
          t->args.push_back(parse_primary());  // `x is divisibleby 3`, `x is equalto 'a'`
        }
        e = std::move(t);
      } else {
        break;
      }
    }
    return ok() ? std::move(e) : nullptr;
  }

  std::vector<Segment> segs_;
  size_t seg_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  Status error_;
};

}  // namespace

Result<Program> parse_template(std::string_view source) {
  auto segments = lex_template(source);
  if (!segments.is_ok()) return segments.status();
  return Parser(std::move(segments.value())).run();
}

}  // namespace tern::jinja
