// Grammars the grammar tests share, written for these tests in GBNF, and
// the helper that compiles one.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "grammar/gbnf.h"

namespace tern::grammar::testing {

// The compiled grammar; a failed test (and null) when it does not compile.
inline std::shared_ptr<const Grammar> compile(const char* gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? std::make_shared<const Grammar>(std::move(g).value()) : nullptr;
}

// JSON (RFC 8259) with optional whitespace between tokens.
inline constexpr const char* kJson = R"G(
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex     ::= [0-9a-fA-F]
number  ::= "-"? int frac? exp?
int     ::= "0" | [1-9] [0-9]*
frac    ::= "." [0-9]+
exp     ::= [eE] [-+]? [0-9]+
ws      ::= [ \t\n\r]*
)G";

// Integer arithmetic with precedence, one expression per line.
inline constexpr const char* kArithmetic = R"G(
root   ::= (expr "\n")+
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")" | "-" factor
num    ::= [0-9]{1,6}
)G";

// A markdown-style list of 1 to 3 items.
inline constexpr const char* kList = R"G(
root ::= item{1,3}
item ::= "- " [a-z ]+ "\n"   # lower-case words
)G";

// A small C-like language: declarations, assignments, if/while blocks.
inline constexpr const char* kCLike = R"G(
root      ::= stmt+
stmt      ::= decl | assign | ifstmt | whilestmt
decl      ::= type " " ident ( " = " expr )? ";\n"
assign    ::= ident " = " expr ";\n"
ifstmt    ::= "if (" cond ") {\n" stmt* "}\n"
whilestmt ::= "while (" cond ") {\n" stmt* "}\n"
cond      ::= expr ( " < " | " > " | " == " | " != " ) expr
expr      ::= operand ( ( " + " | " - " | " * " ) operand )*
operand   ::= ident | [0-9]+
type      ::= "int" | "char"
ident     ::= [a-z] [a-z0-9_]*
)G";

}  // namespace tern::grammar::testing
