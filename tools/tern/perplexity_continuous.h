// tools/tern/perplexity_continuous.h — `tern perplexity --continuous`.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "tern/engine.h"

namespace tern::cli {

struct ContinuousOptions {
  std::string modes = "dense 4,508 0,508";  // engine/continuous_perplexity.h's forms, space-separated
  int segment = 1000;
  int max_tokens = 0;  // 0: the whole text
  std::string chart_path, json_path;
};

// Scores `tokens` under every mode and prints a markdown table of perplexity
// per segment (and the whole text's); writes the chart and JSON when asked.
Status run_continuous(const ContinuousOptions& o, EngineConfig config, const std::vector<TokenId>& tokens);

}  // namespace tern::cli
