// engine/generate.h — single-sequence autoregressive generation.
//
// Runs the prompt through the model in chunks, then samples one token per
// step until max_tokens, an end-of-generation token or a stop string. Text is
// delivered through the callback in pieces that are always complete UTF-8,
// with stop strings held back until they are ruled out. The serving engine of
// a later issue replaces this loop for concurrent requests; this one is the
// plain path for `tern run` and the golden tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tern/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 128;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int n_ctx = 0;           // 0 = the model's training context
  int n_batch = 512;       // prompt tokens per forward pass
  bool penalize_prompt = true;  // repetition penalties see prompt tokens too
};

// FinishReason and finish_reason_name() come from tern/engine.h.

struct GenerateResult {
  std::vector<TokenId> tokens;  // generated ids (including a final EOS if one was sampled)
  std::string text;             // the streamed text, concatenated
  FinishReason finish = FinishReason::Length;
  int n_prompt = 0;
  double prompt_ms = 0.0;
  double generate_ms = 0.0;     // from the first sampled token to the last
};

// on_text(piece): called for each complete piece of text; return false to stop early.
using TextCallback = std::function<bool(const std::string& piece)>;

Result<GenerateResult> generate(const Model& model, const Tokenizer& tokenizer, const std::vector<TokenId>& prompt,
                                const GenerateOptions& options, const TextCallback& on_text);

}  // namespace tern
