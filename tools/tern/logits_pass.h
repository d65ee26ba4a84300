// tools/tern/logits_pass.h — one pass of a model over a text's perplexity
// windows (cut and scored exactly as engine/perplexity.h describes) that can
// also save every scored row's distribution (--save-logits) or compare each
// row with saved base distributions (--kl-divergence). Shared by
// `tern perplexity` and `tern eval quant`.
// The windows are engine/compute_perplexity()'s; this adds what each scored
// row is compared with or saved as.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/perplexity.h"
#include "eval/kl_divergence.h"
#include "model/model.h"

namespace tern::cli {

struct LogitsPassOptions {
  PerplexityOptions ppl;       // max_windows 0 with kl_path: as many windows as were saved
  std::string save_path;       // write base logits here ("" = no)
  std::string kl_path;         // compare with base logits saved here ("" = no)
};

struct LogitsPassResult {
  double perplexity = 0, nll_mean = 0;
  int64_t n_scored = 0;
  int n_windows = 0;
  std::optional<eval::KlSummary> kl;  // with kl_path
};

Result<LogitsPassResult> run_logits_pass(const Model& model, const std::vector<TokenId>& tokens,
                                         const LogitsPassOptions& options,
                                         const std::function<void(int, double)>& progress = {});

// The llama.cpp-style summary block (stdout).
void print_kl_summary(const eval::KlSummary& kl);

}  // namespace tern::cli
