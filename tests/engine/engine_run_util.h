// Helpers for engine tests that run requests to completion on stories260K
// through one InlineEngine (the caller's thread steps it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../model/model_fixture.h"
#include "sanitized.h"
#include "engine/inline_engine.h"

namespace tern::test {

struct Collected {
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;  // per token, when the request asked for them
  std::string text;
  std::optional<RequestOutput> final_output;
  std::vector<PromptTokenLogprob> prompt_logprobs;
  std::vector<float> embedding;
  int n_prompt_logprob_outputs = 0;  // outputs that carried them (one at most)
};

inline EngineConfig base_config() {
  EngineConfig c;
  c.model_path = test::stories_gguf();
  c.n_threads = 2;
  c.kv_memory_bytes = 64ll << 20;
  return c;
}

inline std::unique_ptr<InlineEngine> make_core(const EngineConfig& c) {
  auto core = InlineEngine::create(c);
  EXPECT_TRUE(core.is_ok()) << core.status().message();
  return core.is_ok() ? std::move(core).value() : nullptr;
}

// Greedy request i of a mixed-length set: a prompt of 3 + 5 i tokens, 6 to
// 10 generated, end-of-text ignored.
inline GenerationRequest mixed_length_request(size_t i) {
  GenerationRequest r;
  for (size_t k = 0; k < 3 + 5 * i; ++k) r.prompt_tokens.push_back(static_cast<TokenId>(1 + (k * 31 + i * 977) % 31000));
  r.max_tokens = 6 + static_cast<int>(i % 5);
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return r;
}

// Two greedy requests of 8 tokens whose prompts share their first 300 tokens
// (then 1 more token; then 20 more): the prefix-cache tests' pair.
inline std::pair<GenerationRequest, GenerationRequest> shared_prefix_pair() {
  GenerationRequest first, second;
  for (int k = 0; k < 300; ++k) first.prompt_tokens.push_back(static_cast<TokenId>(100 + (k * 37) % 30000));
  second.prompt_tokens = first.prompt_tokens;
  first.prompt_tokens.push_back(7);
  for (int k = 0; k < 20; ++k) second.prompt_tokens.push_back(static_cast<TokenId>(5000 + k));
  for (GenerationRequest* r : {&first, &second}) {
    r->max_tokens = 8;
    r->ignore_eos = true;
    r->sampling.temperature = 0.0f;
  }
  return {first, second};
}

// Adds reqs[0 .. n_first) to core, runs 4 steps, adds the rest (the preemption
// tests make them more urgent) and runs everything to the end. Returns each
// request's tokens by index and the most requests seen swapped out at once.
struct LateArrivalRun {
  std::vector<std::vector<TokenId>> tokens;
  int max_swapped = 0;
};
inline LateArrivalRun run_with_late_arrivals(InlineEngine& core, const std::vector<GenerationRequest>& reqs,
                                             size_t n_first) {
  LateArrivalRun run;
  run.tokens.resize(reqs.size());
  auto add = [&](size_t i) {
    auto p = core.prepare(reqs[i]);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    if (!p.is_ok()) return;
    core.add(RequestId(i + 1), std::move(p).value(), [&run, i](const RequestOutput& o) {
      if (o.has_token) run.tokens[i].push_back(o.token);
    });
  };
  for (size_t i = 0; i < n_first; ++i) add(i);
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(core.step().is_ok());
  for (size_t i = n_first; i < reqs.size(); ++i) add(i);
  for (int guard = 0; core.has_work() && guard < 10000; ++guard) {
    EXPECT_TRUE(core.step().is_ok());
    run.max_swapped = std::max(run.max_swapped, core.stats().n_swapped);
  }
  EXPECT_FALSE(core.has_work());
  return run;
}

// A greedy request for max_tokens, end-of-text ignored, with its own streaming
// and KV eviction settings when given.
inline GenerationRequest greedy_request(std::vector<TokenId> prompt, int max_tokens,
                                        std::optional<StreamingParams> streaming = std::nullopt,
                                        std::optional<KvEvictParams> kv_evict = std::nullopt) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.streaming = streaming;
  r.kv_evict = kv_evict;
  return r;
}

// A prompt of n tokens from the golden story's own ids (real text for the model).
inline std::vector<TokenId> story_prompt(size_t n) {
  std::vector<TokenId> p{1};
  const std::vector<TokenId> story = golden_ids();
  while (p.size() < n) p.push_back(story[p.size() % story.size()]);
  return p;
}

// Runs every request to completion through one core; returns outputs by index.
inline std::vector<Collected> run_all(InlineEngine& core, const std::vector<GenerationRequest>& reqs) {
  std::vector<Collected> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = core.prepare(reqs[i]);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    if (!p.is_ok()) continue;
    core.add(RequestId(i + 1), std::move(p).value(), [&out, i](const RequestOutput& o) {
      if (o.has_token) {
        out[i].tokens.push_back(o.token);
        out[i].logprobs.push_back(o.logprob);
      }
      out[i].text += o.text;
      if (!o.embedding.empty()) out[i].embedding = o.embedding;
      if (!o.prompt_logprobs.empty()) {
        out[i].prompt_logprobs = o.prompt_logprobs;
        ++out[i].n_prompt_logprob_outputs;
      }
      if (o.finish) out[i].final_output = o;
    });
  }
  for (int guard = 0; core.has_work() && guard < 100000; ++guard) {
    const Status s = core.step();
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  EXPECT_FALSE(core.has_work());
  return out;
}

// The golden run: BOS, 200 greedy tokens.
inline GenerationRequest golden_request() {
  GenerationRequest r;
  r.prompt_tokens = {1};
  r.max_tokens = 200;
  r.sampling.temperature = 0.0f;
  return r;
}

// stories260K's golden 200 tokens after BOS.
inline std::vector<TokenId> golden_continuation() {
  const std::vector<int> golden = golden_ids();
  return std::vector<TokenId>(golden.begin() + 1, golden.end());
}

inline std::string text_sample() {
  std::ifstream in(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().substr(0, 20000);
}

// `n` (at most 32) requests of mixed prompt and output lengths; groups of them
// share long prefixes (several full blocks) so prefix caching has something to
// find. Every third is sampled (seeded) unless `greedy_only`, which instead
// gives some of them penalties and log-probabilities.
// The invariance suites' batch (engine, speculation): half of it under a
// sanitizer — the same paths (chunking, prefix hits, preemption by swap and
// recompute, sampled and greedy requests) in half the steps; the whole of it
// in the optimised build.
inline constexpr int kInvarianceRequests = kSanitized ? 16 : 32;

inline std::vector<GenerationRequest> mixed_requests(const Tokenizer& tok, bool greedy_only = false, int n = 32) {
  const std::vector<TokenId> all = tok.encode(text_sample(), false, false);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const size_t start = static_cast<size_t>(i % 4) * 600;        // 4 shared stories
    const size_t len = 5 + static_cast<size_t>((i * 37) % 150);   // 5 .. 154 prompt tokens
    r.prompt_tokens = {1};
    r.prompt_tokens.insert(r.prompt_tokens.end(), all.begin() + start, all.begin() + start + len);
    r.max_tokens = 8 + (i * 13) % 60;
    r.ignore_eos = true;  // fixed lengths: every request exercises decode
    r.sampling.temperature = 0.0f;
    if (!greedy_only && i % 3 == 0) {
      r.sampling.temperature = 0.8f;  // seeded sampling must be invariant too
      r.sampling.seed = 1000 + i;
    }
    if (greedy_only && i % 5 == 1) r.sampling.repetition_penalty = 1.3f;
    if (greedy_only && i % 5 == 2) r.sampling.presence_penalty = 0.8f;
    if (greedy_only && i % 4 == 3) r.n_logprobs = 3;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

}  // namespace tern::test
