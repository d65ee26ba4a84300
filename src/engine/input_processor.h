// engine/input_processor.h — a request validated once, before it reaches the
// engine core: sampling parameters, token ids, the prompt against the context
// and the KV pool, max_tokens — each with one message, for every caller
// (`tern run`, `tern batch`, `tern serve`). It also tokenises text prompts and
// works out the stop token ids (end-of-generation ids unless ignore_eos), and
// compiles an output constraint (grammar/constraint.h, cached).
// Immutable after construction; prepare() and check_context() are safe from
// any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "kv/seq_window.h"
#include "tern/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern {

// A validated request with its prompt as token ids.
struct PreparedRequest {
  GenerationRequest request;
  std::vector<TokenId> prompt;
  std::vector<TokenId> stop_token_ids;  // sampling one of these ends the request (Eos)
  std::shared_ptr<const grammar::Grammar> grammar;  // request.constraint compiled; null when none
  SeqWindow window;  // request.streaming (or the engine's) as the sequence keeps it; inactive: everything
};

struct InputLimits {
  int32_t n_vocab = 0;
  int32_t n_ctx = 0;            // the context limit asked for (or the model's)
  int64_t max_positions = 0;    // what one sequence can hold: min(n_ctx, the KV pool)
  int n_blocks_total = 0;
  int block_size = 16;
  StreamingParams streaming;    // the engine's, for requests that do not say
  KvEvictParams kv_evict;       // the same
};

class InputProcessor {
 public:
  InputProcessor(const Tokenizer& tokenizer, InputLimits limits);

  // InvalidArgument (bad parameters, token ids, empty prompt) or OutOfRange
  // (a prompt the context or the KV pool can never hold), naming the limit.
  Result<PreparedRequest> prepare(GenerationRequest request) const;
  // Whether a prompt of n_prompt tokens and up to max_tokens more (< 0: as
  // many as fit) fit one sequence; the figures a caller needs to say why not.
  // Streaming (the request's, else the engine's): neither the prompt nor
  // generation is bounded by the context.
  ContextCheck check_context(int64_t n_prompt, int64_t max_tokens,
                             const std::optional<StreamingParams>& streaming = std::nullopt) const;
  const InputLimits& limits() const { return limits_; }

 private:
  const Tokenizer& tok_;
  InputLimits limits_;
  std::vector<TokenId> eog_ids_;  // the vocabulary's end-of-generation tokens
};

}  // namespace tern
