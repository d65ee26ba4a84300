// engine/perplexity.h — perplexity over non-overlapping windows, scored the
// way llama.cpp's perplexity tool scores them so the figures compare:
// the text is tokenized once (with BOS when the vocabulary adds one), cut
// into floor(n_tokens / n_ctx) windows of n_ctx tokens, each window's first
// token replaced by BOS (when add_bos), and only the second half of each
// window scored: logits at positions [n_ctx/2, n_ctx-2] predict the tokens
// that follow them. The first half gives every scored token enough context.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "tern/config.h"
#include "model/model.h"

namespace tern {

struct PerplexityOptions {
  int n_ctx = 512;
  int max_windows = 0;  // 0 = all
  bool add_bos = true;
  TokenId bos = -1;
  int n_batch = 512;
  KvType kv_type = KvType::F32;  // the window's K/V cache (f32: no loss from the cache)
};

struct PerplexityResult {
  double perplexity = 0.0;
  double nll_mean = 0.0;   // mean negative log-likelihood (nats) of the scored tokens
  int64_t n_scored = 0;
  int n_windows = 0;
};

// progress(window_index, running_perplexity) after each window. on_row, when
// given, sees every scored row in order: its logits [n_vocab] and the token
// it predicts (KL divergence and saved logits hang off this); an error it
// returns stops the pass.
using PerplexityRowFn = std::function<Status(std::span<const float> logits, TokenId target)>;
Result<PerplexityResult> compute_perplexity(const Model& model, const std::vector<TokenId>& tokens,
                                            const PerplexityOptions& options,
                                            const std::function<void(int, double)>& progress = {},
                                            const PerplexityRowFn& on_row = {});

}  // namespace tern
