// engine/continuous_perplexity.h — one long text scored as a single sequence
// through the serving engine, the way StreamingLLM measures it: every token
// from the second on is predicted from what the sequence keeps before it,
// under one of these modes:
//
//   dense        full attention over everything (the context stretched to the text)
//   SINKS,WINDOW StreamingLLM (0,WINDOW: a plain sliding window; engine/streaming.h)
//   shift:SINKS  context shift in the engine's context
//   h2o:B,R      H2O heavy-hitter eviction (engine/streaming.h) from the first
//                block on, in block-sized chunks (each token sees what decoding kept)
//   recompute:W  each token predicted from the W tokens before it, recomputed
//                from scratch (the paper's "sliding window with re-computation":
//                exact for a model trained on W + 1 positions, and W times the work)
//
// Threading: runs its own engine on the caller's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tern/engine.h"

namespace tern {

struct ContinuousMode {
  enum class Kind { Dense, Streaming, Evict, Recompute };
  Kind kind = Kind::Dense;
  StreamingParams streaming;  // Streaming
  KvEvictParams evict;        // Evict
  int32_t window = 0;         // Recompute: tokens of context per scored token
  std::string name;           // the text it was parsed from
};

// "dense", "recompute:W", "h2o:B,R" or a streaming text form; InvalidArgument otherwise.
Result<ContinuousMode> parse_continuous_mode(std::string_view text);

// Negative log-likelihoods (nats) of tokens[1..n-1], in order. `base` gives
// the model, threads, KV type and context (a shift's; a window's pool is
// sized for its sinks and window).
Result<std::vector<double>> continuous_nll(const EngineConfig& base, const std::vector<TokenId>& tokens,
                                           const ContinuousMode& mode);

// Perplexity of each run of `segment` consecutive scored tokens (the last may be shorter).
std::vector<double> segment_perplexities(const std::vector<double>& nll, size_t segment);

}  // namespace tern
