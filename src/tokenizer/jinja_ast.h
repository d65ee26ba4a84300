// tokenizer/jinja_ast.h — internals of the chat-template interpreter (not a public header).
//
// Contract: the Jinja subset that model chat templates use, in three passes:
//   lex_template  (jinja_lexer.cpp)  source -> segments (text and tag token lists), with
//                                    Jinja's whitespace control applied the way Hugging Face
//                                    renders templates (trim_blocks and lstrip_blocks on);
//   parse_template (jinja_parser.cpp) segments -> Program (an immutable AST);
//   render_program (jinja_eval.cpp)  Program + global variables -> text.
// A Program is immutable after parsing and may be rendered from many threads at once; each
// render has its own Renderer state. Values have Python semantics (str(), ==, truthiness),
// because the templates were written against Python's Jinja2.
// Every pass bounds its work (nesting depth, steps, output size) and reports errors as Status;
// nothing here throws or aborts on hostile input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tern::jinja {

// ---- values -------------------------------------------------------------------------------

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, like a Python dict

// Array = list, Map = dict; Macro = a {% macro %} (or a call block's caller()), callable.
enum class ValueKind { Undefined, None, Bool, Int, Float, String, Array, Map, Namespace, Macro };

struct Node;

struct Value {
  ValueKind kind = ValueKind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::shared_ptr<List> list;  // List
  std::shared_ptr<Dict> dict;  // Dict and Namespace; a namespace is shared so `set ns.x` is seen by all
  const Node* macro = nullptr;  // Macro: its definition (parameters and body), owned by the Program
  // Macro made by a call block (caller()): the scopes of the call site, where its body runs.
  std::shared_ptr<const std::vector<Dict>> closure;

  static Value none() { Value v; v.kind = ValueKind::None; return v; }
  static Value of_bool(bool x) { Value v; v.kind = ValueKind::Bool; v.b = x; return v; }
  static Value of_int(int64_t x) { Value v; v.kind = ValueKind::Int; v.i = x; return v; }
  static Value of_float(double x) { Value v; v.kind = ValueKind::Float; v.f = x; return v; }
  static Value of_string(std::string x) { Value v; v.kind = ValueKind::String; v.s = std::move(x); return v; }
  static Value of_list(List x) {
    Value v; v.kind = ValueKind::Array; v.list = std::make_shared<List>(std::move(x)); return v;
  }
  static Value of_dict(Dict x, ValueKind kind = ValueKind::Map) {
    Value v; v.kind = kind; v.dict = std::make_shared<Dict>(std::move(x)); return v;
  }

  bool is_undefined() const { return kind == ValueKind::Undefined; }
  bool is_string() const { return kind == ValueKind::String; }
  bool is_number() const { return kind == ValueKind::Int || kind == ValueKind::Float; }
  bool is_mapping() const { return kind == ValueKind::Map || kind == ValueKind::Namespace; }
  // Key lookup in a dict or namespace; nullptr when absent or not a mapping.
  const Value* find(std::string_view key) const;
};

// Python-flavoured helpers shared by the evaluator and its builtins (jinja_value.cpp).
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
const char* type_name(const Value& v);
// Append str(v) / repr(v) / json.dumps(v, ensure_ascii=False, indent=indent) to `out`.
// They return false once `out` grows past max_bytes (a list holding one big string many
// times could otherwise expand without bound); `out` is then incomplete. indent < 0 is
// json.dumps's default, one line with ", " and ": " separators.
bool append_str(const Value& v, std::string& out, size_t max_bytes);
bool append_repr(const Value& v, std::string& out, size_t max_bytes);
bool append_json(const Value& v, int indent, std::string& out, size_t max_bytes);
// Code point starts of a UTF-8 string plus a final s.size(), so Python-style indexing and
// len() count characters, not bytes.
std::vector<size_t> code_points(const std::string& s);

// Builtins (jinja_builtins.cpp). Errors carry no location; the evaluator adds it.
struct CallArgs {
  std::vector<Value> args;
  Dict kwargs;
  const Value* kwarg(std::string_view key) const;
};
Result<Value> apply_filter(const std::string& name, const Value& in, const CallArgs& call, size_t max_bytes);
Result<bool> apply_test(const std::string& name, const Value& in, const CallArgs& call);
Result<Value> call_method(const Value& obj, const std::string& name, const CallArgs& call, size_t max_bytes);

// ---- lexer --------------------------------------------------------------------------------

enum class TokenKind { Name, String, Int, Float, Op, End };

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;  // name, operator, or decoded string literal
  int64_t i = 0;
  double f = 0.0;
  int line = 0, column = 0;
};

enum class SegmentKind { Text, Expr, Stmt };  // comments are dropped after whitespace control

struct Segment {
  SegmentKind kind = SegmentKind::Text;
  std::string text;           // Text
  std::vector<Token> tokens;  // Expr / Stmt, closed by an End token at the tag's end
  int line = 0, column = 0;   // where the segment starts
};

Result<std::vector<Segment>> lex_template(std::string_view source);

// ---- syntax tree --------------------------------------------------------------------------

enum class ExprKind {
  Literal,     // literal
  Name,        // name
  ListLit,     // args = elements
  DictLit,     // args = key0, value0, key1, value1, ...
  GetAttr,     // args[0] . name
  GetItem,     // args[0] [ args[1] ]
  Slice,       // args[0] [ args[1] : args[2] : args[3] ]  (null = omitted)
  Call,        // name ( args, kwargs )              global function
  MethodCall,  // args[0] . name ( args[1..], kwargs )
  Filter,      // args[0] | name ( args[1..], kwargs )
  Test,        // args[0] is [not] name ( args[1..] )
  Unary,       // name ("not", "-", "+") args[0]
  Binary,      // args[0] name args[1]; name "not in" for the negated membership test
  Ternary,     // args[0] if args[1] else args[2]  (args[2] null = undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0, column = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // Test: "is not"
};

enum class NodeKind {
  Text, Output, If, For, Set, Break, Continue,
  SetBlock,     // {% set x %}body{% endset %}: targets[0] = the body's text
  Block,        // {% generation %}body{% endgeneration %}: the body, as if the tags were absent
  Macro,        // {% macro name(params) %}body{% endmacro %}: targets[0] = name
  CallBlock,    // {% call name(args) %}body{% endcall %}: expr = the call, body = caller()
  FilterBlock,  // {% filter name(args) %}body{% endfilter %}: expr = the filter over a placeholder
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  NodeKind kind = NodeKind::Text;
  int line = 0, column = 0;
  std::string text;                  // Text
  ExprPtr expr;                      // Output, Set (value), For (iterable)
  std::vector<ExprPtr> conditions;   // If: one per if/elif branch
  std::vector<Body> bodies;          // If: a body per condition, then else if present; For: body, else
  std::vector<std::string> targets;  // For: loop variables; Set: the variable
  std::string attr;                  // Set: attribute for `set ns.attr = ...`, else empty
  ExprPtr filter;                    // For: the `if` filter, may be null
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: parameters, with defaults (or null)
};

struct Program {
  Body body;
};

Result<Program> parse_template(std::string_view source);

// ---- evaluation ---------------------------------------------------------------------------

struct RenderLimits {
  size_t max_output_bytes = size_t{1} << 20;  // also caps every string value built on the way
  size_t max_list_items = size_t{1} << 16;    // range() and list concatenation; a longer chat
                                               // could not fit the output limit anyway
  int64_t max_steps = 2'000'000;               // nodes executed + expressions evaluated
  int max_depth = 256;                         // runtime nesting of expressions and blocks
  int64_t now_unix = 0;                        // the clock strftime_now() reads (UTC); 0 = now
};

Result<std::string> render_program(const Program& program, Dict globals, const RenderLimits& limits);

}  // namespace tern::jinja
