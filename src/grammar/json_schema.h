// grammar/json_schema.h — a JSON Schema as GBNF: the JSON texts the grammar
// generates are exactly instances of the schema, for the keywords below.
//
// Supported: type (one or a list), properties / required /
// additionalProperties, items / prefixItems / minItems / maxItems, enum,
// const, anyOf / oneOf (as alternatives: oneOf's exclusivity is not
// enforced), allOf of object schemas (merged), $ref to #/$defs/... or
// #/definitions/... (recursive schemas work), string minLength / maxLength /
// pattern (grammar/regex.h) / format (date, time, date-time, uuid, email;
// other formats are annotations and ignored, as the spec allows), integer
// minimum / maximum / exclusiveMinimum / exclusiveMaximum, and `true`/{}
// (any JSON value). Annotations (title, description, default, examples, ...)
// are ignored.
//
// Decisions: properties come out in the schema's order (required ones always,
// optional ones may be left out). An object schema that lists properties
// generates no others unless additionalProperties says so (as OpenAI's strict
// mode and most structured-output engines do: a model should not invent
// keys); one that lists none allows any. Whitespace between tokens is at most
// one space or newline plus indentation (bounded), so output stays compact
// and a model cannot stall on blanks.
//
// Refused, naming the keyword (rather than generating JSON that may not
// validate): not, if/then/else, uniqueItems, multipleOf, patternProperties,
// propertyNames, dependent*, contains, unevaluated*, min/maxProperties,
// bounds on type number, $ref outside the document.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace tern::grammar {

// GBNF text whose root rule is the schema. InvalidArgument for malformed
// JSON or schemas; Unsupported for the keywords above.
Result<std::string> json_schema_to_gbnf(std::string_view schema_json);

}  // namespace tern::grammar
