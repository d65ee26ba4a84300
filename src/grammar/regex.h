// grammar/regex.h — a regular expression as a GBNF expression, for the
// `regex` constraint and JSON Schema's `pattern`.
//
// The whole generated text must match (the pattern is anchored at both ends;
// a leading ^ and trailing $ are accepted and change nothing), because a
// constraint says what the output is, not what it contains.
//
// Supported (ECMAScript syntax, as JSON Schema specifies): literals and
// escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ and escaped punctuation), '.',
// classes [a-z] [^...] with \d \w \s \D \W \S inside and out, groups (...) and
// (?:...), alternation |, quantifiers * + ? {m} {m,} {m,n} (a lazy '?'
// suffix is accepted: laziness does not change what matches). '.' matches
// any character but a newline, as in ECMAScript.
// Refused with an error naming them: backreferences, lookaround, named
// groups' references, anchors other than at the ends, and word boundaries —
// none of which a context-free grammar expresses.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace tern::grammar {

// A GBNF expression (no rule names; groups in parentheses) matching exactly
// the strings the regex matches in full. json_string: the expression matches
// the body of a JSON string literal whose decoded value the regex matches
// (", \ and control characters appear escaped), for JSON Schema's pattern.
Result<std::string> regex_to_gbnf(std::string_view regex, bool json_string = false);

// A GBNF string literal ("...") for `text`, escaped.
std::string gbnf_literal(std::string_view text);

}  // namespace tern::grammar
