// tools/tern/batch_line.h — one line of a `tern batch` JSONL file: a JSON
// object with "prompt" (text or token ids) and optional "id", sampling
// fields, "stop", "priority", "tenant", "ignore_eos" and one output constraint
// ("grammar", "regex", "json_schema" or "response_format"). Separate from
// cmd_batch.cpp so that a fuzz harness can feed it (tests/fuzz).
#pragma once

#include <string>

#include "core/json.h"

#include "tern/engine.h"

namespace tern::cli {

struct BatchLine {
  Json id;  // the line's "id", else its 0-based line number (set by the caller)
  GenerationRequest request;
};

// Reads one line into `item`; returns an error message a user can act on, or
// "" when the request is valid as far as a line can tell.
std::string parse_batch_line(const std::string& line, BatchLine& item);

}  // namespace tern::cli
