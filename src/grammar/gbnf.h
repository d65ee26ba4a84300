// grammar/gbnf.h — GBNF, llama.cpp's grammar syntax, so grammars written for
// llama.cpp work here unchanged:
//
//   root   ::= item ("," ws item)*        # rules: name ::= alternatives
//   item   ::= "lit\n" | [a-z0-9_] | [^"\\] | . | ( group ) | other-rule
//   ws     ::= [ \t\n]*                   # postfix * + ? {m} {m,} {m,n} {,n}
//
// Literals and classes may use \n \r \t \\ \" \[ \] \- \xHH \uHHHH
// \UHHHHHHHH; classes and '.' match one Unicode character (its UTF-8 bytes).
// A rule ends at the end of its line unless inside parentheses or right
// after ::= or |. '#' starts a comment. The grammar starts at `root`.
// Token references (<[id]>) are not supported: an error says so.
//
// Errors name the line and column and what was expected.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace tern::grammar {

Result<Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace tern::grammar
