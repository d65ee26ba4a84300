// engine/generate.h — one request through an Engine, start to end, on the
// caller's thread: what `tern run` does (and tests of the generation path).
// There is no second generation loop: the request goes through the same
// input processor, scheduler, model runner and output processor as every
// request of `tern batch` and `tern serve`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tern/engine.h"

namespace tern {

// An engine for one sequence at a time, as `tern run` uses: a KV pool of
// exactly one context (n_ctx; 0 = the model's) in F32, no prefix caching.
EngineConfig single_sequence_config(const std::string& model_path, int32_t n_ctx = 0, int n_threads = 0);

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 128;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  OutputConstraint constraint;
};

struct GenerateResult {
  std::vector<TokenId> tokens;  // generated ids (including a final EOS if one was sampled)
  std::string text;             // the streamed text, concatenated
  FinishReason finish = FinishReason::Length;
  int n_prompt = 0;
  double prompt_ms = 0.0;       // arrival to the first token (TTFT)
  double generate_ms = 0.0;     // first token to the last
};

// on_text(piece): each complete piece of text, on the engine's output
// thread; return false to stop early (the request is cancelled).
using TextCallback = std::function<bool(const std::string& piece)>;

// Errors: those of Engine::add_request (bad parameters, a prompt the context
// cannot hold), and Internal when the engine failed mid-way.
Result<GenerateResult> generate(Engine& engine, std::vector<TokenId> prompt, const GenerateOptions& options,
                                const TextCallback& on_text = {});

}  // namespace tern
