// tern/request.h — what a request asks for and what comes back (public API):
// sampling parameters, the request, its streamed outputs and finish reasons.
// Plain data; no src/ header is needed to use them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tern/ids.h"
#include "tern/status.h"

namespace tern {

struct SamplingParams {
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFFFFFFFFFFull;

  float temperature = 0.8f;         // <= 0 means greedy (argmax; ties -> lowest id)
  int top_k = 40;                   // <= 0 (or >= n_vocab) disables
  float top_p = 0.95f;              // >= 1 disables
  float min_p = 0.05f;              // <= 0 disables; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // CTRL-style: logit>0 ? logit/rp : logit*rp (1 disables)
  float frequency_penalty = 0.0f;   // OpenAI: logit -= count * frequency_penalty
  float presence_penalty = 0.0f;    // OpenAI: logit -= (count > 0) * presence_penalty
  int penalty_last_n = 64;          // window of recent accepted tokens for all three penalties;
                                    // -1 = whole history, 0 disables the penalties
  uint64_t seed = kRandomSeed;      // kRandomSeed draws one from std::random_device

  // InvalidArgument naming the first bad field and the allowed range.
  Status validate() const;
};

// Output constrained to a grammar (src/grammar/): the generated text must be
// a sentence of it, and end-of-text is sampled only where the sentence is
// complete. text: GBNF (llama.cpp's grammar syntax), a JSON Schema (JSON
// text), or a regular expression; JsonObject needs none (any JSON object).
enum class ConstraintKind { None, Gbnf, JsonSchema, Regex, JsonObject };
struct OutputConstraint {
  ConstraintKind kind = ConstraintKind::None;
  std::string text;
};

// Generation past the context in constant KV memory (docs/streaming.md).
//   Window  StreamingLLM: each token reads the first `sinks` positions and the
//           last `window` ones; what falls between is freed as it goes.
//   Shift   llama.cpp's context shift: the first `sinks` positions stay; when
//           the context is full, the older half of the rest is dropped.
// Text form (flags, request fields): "SINKS,WINDOW", "shift", "shift:SINKS", "off".
enum class StreamingMode { Off, Window, Shift };
struct StreamingParams {
  StreamingMode mode = StreamingMode::Off;
  int32_t sinks = 4;
  int32_t window = 0;  // Window: >= 1, and sinks + window within the context
};

// Lossy KV eviction by importance, in whole KV blocks (docs/streaming.md);
// within the context, keys at their true positions:
//   H2o     heavy hitters: at most `budget` positions' blocks once the prompt
//           is in, those holding the last `recent` positions and the ones the
//           attention has weighed most so far.
//   SnapKv  once, after the prompt: the blocks of its last `recent` positions
//           (the observation window) and those they attend to most, within
//           `budget`; decode keeps what it adds.
// Text form: "h2o:BUDGET,RECENT", "snapkv:BUDGET,WINDOW", "off".
enum class KvEvictMode { Off, H2o, SnapKv };
struct KvEvictParams {
  KvEvictMode mode = KvEvictMode::Off;
  int32_t budget = 0;
  int32_t recent = 0;
  // H2o: also while the prompt is computed, after every chunk (what a token
  // saw then depends on the chunks: the continuous perplexity harness runs
  // block-sized ones, so each token sees what decoding would have kept).
  bool during_prompt = false;
};

enum class FinishReason { Length, Stop, Eos, Context, Cancelled, Error };
enum class Pooling { None, Mean, Last };
const char* finish_reason_name(FinishReason r);

struct GenerationRequest {
  std::string prompt;                // used when prompt_tokens is empty
  std::vector<int32_t> prompt_tokens;
  bool add_special = true;           // BOS etc. when tokenising `prompt`
  SamplingParams sampling;
  int32_t max_tokens = 128;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int n_logprobs = -1;               // -1 none; 0 the sampled token's; k > 0 also the top k
  // Prompt log-probabilities: -1 none; k >= 0: every prompt token's (from the second on, as the
  // model predicts it from the tokens before), with the top k. The prompt is computed in full
  // (no prefix-cache hit); with max_tokens 0 the model still runs over the prompt, to score it.
  int prompt_logprobs = -1;
  // Embedding: the prompt's final hidden states (after the output norm) pooled — the mean over
  // its tokens (every token computed, no prefix-cache hit) or the last token's — and, with
  // embed_normalize, scaled to unit length. Returned with the first output; with max_tokens 0
  // the model runs over the prompt and generates nothing.
  Pooling embed = Pooling::None;
  bool embed_normalize = true;
  int priority = 0;                  // lower = more urgent
  std::vector<int32_t> stop_token_ids;  // generating one of these ends the request (kept in the output)
  int spec_k = -1;                   // speculative proposals per step: -1 the engine's setting, 0 off
  int spec_tree = -1;                // candidates per proposed position (1..8): -1 the engine's setting
  OutputConstraint constraint;       // none by default; cannot be combined with ignore_eos
  // Unset: the engine's (EngineConfig::streaming). On, the request may run past
  // the context (max_tokens is not bounded by it); it is not speculated.
  std::optional<StreamingParams> streaming;
  // Unset: the engine's (EngineConfig::kv_evict). Not with streaming; not speculated.
  std::optional<KvEvictParams> kv_evict;
  // (token id, bias) added to the model's logits before sampling (OpenAI's
  // logit_bias: -100 all but bans a token, +100 all but forces it); |bias| <= 100.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::string tenant;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// A prompt token's log-probability given the tokens before it.
struct PromptTokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  int32_t rank = 1;  // 1 = the model's most likely token there
  std::vector<TokenLogprob> top;
};

// One streamed output. The last one of a request has finish set.
struct RequestOutput {
  RequestId id;
  bool has_token = false;
  int32_t token = 0;
  std::string text;                  // complete UTF-8; may be empty (held back for a stop string)
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
  // With prompt_logprobs, on the request's first output: prompt tokens 1..n-1, in order.
  std::vector<PromptTokenLogprob> prompt_logprobs;
  std::vector<float> embedding;      // with embed: [n_embd], on the request's first output
  std::optional<FinishReason> finish;
  std::string error;                 // when finish == Error
  // Final-output figures.
  int32_t n_tokens_prompt = 0;
  int32_t n_tokens_generated = 0;
  int32_t n_tokens_cached = 0;       // prompt tokens served from the prefix cache (first admission)
  int n_preemptions = 0;
  double ttft_ms = 0;
  double itl_ms_mean = 0;
  double e2e_ms = 0;
};

using OutputCallback = std::function<void(const RequestOutput&)>;

// Whether a prompt and its max_tokens fit one sequence (Engine::check_context),
// with the figures to say why not.
struct ContextCheck {
  bool ok = true;
  bool prompt_too_long = false;  // the prompt alone leaves no position to generate
  int64_t n_over = 0;            // tokens over the limit (prompt + max_tokens, or prompt + 1)
  int64_t limit = 0;             // positions one sequence may hold
  bool limit_is_kv_pool = false; // the KV pool, not the context, sets the limit
  int64_t n_ctx_model = 0;       // the context asked for (or the model's)
  int64_t n_prompt = 0, max_tokens = 0;
};

}  // namespace tern
