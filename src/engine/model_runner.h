// engine/model_runner.h — one engine step's execution: the scheduler's plan
// in, sampled tokens out.
//
// execute() builds the plain-data ForwardInput from the scheduler's request
// state (tokens, n_computed, proposed spec_tokens) and the KV manager's block
// tables — tokens, positions, one KV slot per token and group, one block
// table per sequence and group, the rows whose logits are wanted — runs the
// model once, and for every chunk that reaches the end of its request's
// tokens samples one token from the last row (log-probabilities first, from
// the raw logits). A chunk carrying n proposed tokens gets n + 1 rows: each
// proposal is verified against the row before it (Sampler::verify: greedy
// match, or exact rejection sampling) until one is rejected — its
// replacement ends the chunk — or all are accepted and the last row gives
// one token more. Proposals may form a token tree (SchedRequest::spec_parents):
// node j is stored at n + j past the n real tokens and attends to its own
// ancestors only (ForwardInput::parent/kv_pos); verification walks from the
// last real token through the children it accepts (Sampler::verify_any), and
// the accepted path's keys/values are then copied to the places their
// positions name (Backend::copy_kv). It returns, per chunk, what
// Scheduler::update() takes (n_accepted counts the proposals kept). Samplers and output constraints
// live here, one per request: a constrained request's rows are masked by its
// grammar matcher before sampling or verification (tokens the grammar cannot
// take get -inf; end-of-text only where the sentence is complete), and each
// emitted token is fed to the matcher, so speculative proposals are checked
// by the same mask as sampled tokens. Requests under the same grammar share
// one MaskCache (a batch of one schema walks each grammar state's mask once).
//
// An embedding request gets hidden rows (the final normed hidden state) for
// the prompt positions its pooling needs, summed across chunks, and its
// pooled vector once its prompt completes.
//
// A request asking for prompt log-probabilities gets a row for every prompt
// token it computes (the scheduler gives it no prefix-cache hit), each scored
// from the raw logits (before bias, grammar and penalties) and returned once,
// in the step where its prompt completes.
//
// Any number of logits rows per sequence can be asked for (logits_rows):
// their values are the same bits as feeding the tokens one by one.
// Threading: the engine's step thread only.
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/matcher.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "scheduler/kv_manager.h"
#include "scheduler/scheduler.h"
#include "tern/engine.h"

namespace tern {

// Log-probabilities of one sampled token (when its request asked for them).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

struct RunnerOutput {
  std::vector<ChunkResult> results;               // parallel to SchedulerOutput::chunks
  std::vector<std::vector<TokenLogprobs>> logprobs;  // parallel: one per new token when asked, else empty
  // Parallel: a request's prompt log-probabilities (tokens 1..n-1), in the step its prompt completes.
  std::vector<std::vector<PromptTokenLogprob>> prompt_logprobs;
  // Parallel: a request's pooled embedding, in the step its prompt completes.
  std::vector<std::vector<float>> embeddings;
  int64_t n_tokens = 0;                           // tokens run through the model
  int64_t n_spec_proposed = 0, n_spec_accepted = 0;  // proposals verified this step, and kept
  int64_t n_spec_verifies = 0;                       // chunks that carried proposals
  int64_t n_spec_branch_accepted = 0;                // accepted proposals off a tree's first path
};

// What the runner keeps for one request.
struct RunnerRequest {
  SamplingParams sampling;
  int n_logprobs = -1;
  int n_prompt_logprobs = -1;                         // -1 none; else each prompt token's, with the top k
  Pooling embed = Pooling::None;                      // pool the prompt's final hidden states
  bool embed_normalize = true;
  std::span<const TokenId> prompt;                    // the penalties see it, as `tern run` always did
  std::vector<std::pair<TokenId, float>> logit_bias;  // added to each row (after log-probabilities are taken)
  std::shared_ptr<const grammar::Grammar> grammar;    // null: unconstrained
  std::shared_ptr<const grammar::TokenVocab> vocab;   // the vocabulary's pieces and trie; required with a grammar
  std::vector<TokenId> end_ids;                       // tokens that end the request: allowed only where the grammar can end
};

class ModelRunner {
 public:
  // n_ctx_seq: the positions one sequence may reach (ForwardInput::n_ctx_seq); 0 = the model's.
  ModelRunner(const Model& model, KvManager& kv, int32_t n_ctx_seq = 0);

  // Sampler state for a request (penalties see the prompt, as `tern run` always did).
  void add_request(RequestId id, const RunnerRequest& r);
  void remove_request(RequestId id);

  // One forward pass over every chunk; an error fails the whole step.
  Result<RunnerOutput> execute(const SchedulerOutput& so, const Scheduler& sched);

  // The logits of the last `n_rows[i]` tokens of chunk i (rows in chunk
  // order), without sampling: what speculative verification and prompt
  // log-probabilities read. [sum n_rows][n_vocab].
  Result<std::vector<float>> logits(const SchedulerOutput& so, const Scheduler& sched, std::span<const int> n_rows);

 private:
  struct RequestState {
    RequestState(Sampler s, int n) : sampler(std::move(s)), n_logprobs(n) {}
    Sampler sampler;
    int n_logprobs = -1;
    std::unique_ptr<grammar::Matcher> matcher;  // null: unconstrained
    std::shared_ptr<const grammar::TokenVocab> vocab;
    std::vector<TokenId> end_ids;
    std::vector<std::pair<TokenId, float>> logit_bias;
    std::vector<float> end_logits;    // scratch [end_ids]
    // Prompt log-probabilities: the prompt, the entries so far, and the next position to score.
    int n_prompt_logprobs = -1;
    std::vector<TokenId> prompt;
    std::vector<PromptTokenLogprob> prompt_lps;
    int32_t prompt_lp_next = 1;
    // Embedding: the pooling, the sum of the hidden rows so far, and the next position to add.
    Pooling embed = Pooling::None;
    bool embed_normalize = true;
    int32_t n_prompt = 0;
    std::vector<double> embed_sum;
    int32_t embed_next = 0;
  };
  // The prompt positions [from, to) of this chunk whose hidden states the request's pooling needs.
  std::pair<int32_t, int32_t> hidden_wanted(const ScheduledChunk& c, const SchedRequest& r,
                                            const RequestState* st) const;
  // Adds rows for positions [from, to) to the request's sum; the pooled vector once complete.
  std::vector<float> pool_hidden(RequestState& st, int32_t from, const float* rows, int32_t n, bool samples);
  // Rows this chunk needs: the sampling row(s), and with prompt log-probabilities every prompt row.
  int rows_wanted(const ScheduledChunk& c, const SchedRequest& r, const RequestState* st) const;
  // Scores the prompt tokens that rows [first_pos, first_pos + n) predict.
  void score_prompt(RequestState& st, int32_t first_pos, const float* rows, int32_t n);
  // The request's logit bias, then its grammar's mask (tokens the grammar
  // cannot take get -inf): what every row goes through before sampling or verification.
  void constrain(RequestState& st, std::span<float> row);
  // Records an emitted token: penalties, then the grammar.
  void accept_token(RequestState& st, TokenId tok);
  // Verifies a chunk's proposals row by row (rows: [n_spec + 1][n_vocab]),
  // filling its result; returns how many proposals were accepted.
  int32_t verify_chunk(RequestState& st, const SchedRequest& r, const ScheduledChunk& c, std::span<float> rows,
                       ChunkResult& res, std::vector<TokenLogprobs>& logprobs);
  // Fills input_ for the chunks; n_rows[i] trailing tokens of chunk i get logits rows, and
  // positions hidden_[i].first .. second hidden rows.
  Status build_input(const SchedulerOutput& so, const Scheduler& sched, std::span<const int> n_rows);

  const Model& model_;
  KvManager& kv_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
  ForwardInput input_;
  std::vector<KvPoolView> pools_;
  std::vector<float> logits_;  // [n_rows][n_vocab]
  std::vector<std::pair<int32_t, int32_t>> hidden_;  // per chunk of the step: positions wanting hidden rows
  std::vector<RequestState*> chunk_states_;          // per chunk of the step: its runner state (null: none)
  std::vector<float> hidden_rows_;                   // [n_hidden][n_embd]
  std::vector<int32_t> depth_;                       // scratch: a token tree's depths (build_input)
  std::vector<int32_t> path_;                        // scratch: a tree's accepted proposals, root first (verify_chunk)
  std::vector<int32_t> kids_;                        // scratch: the children of the node verified (verify_chunk)
  std::vector<TokenId> cands_;                       // scratch: their tokens
  // Mask caches by grammar; each entry keeps its grammar and vocabulary alive
  // (the key stays valid). Idle ones beyond kIdleMaskCaches are dropped.
  struct SharedMasks {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::shared_ptr<const grammar::TokenVocab> vocab;
    std::shared_ptr<grammar::MaskCache> masks;
  };
  static constexpr size_t kIdleMaskCaches = 8;
  std::unordered_map<const grammar::Grammar*, SharedMasks> mask_caches_;
  // The cache for this grammar and vocabulary (created when new).
  std::shared_ptr<grammar::MaskCache> masks_for(const RunnerRequest& r);
};

}  // namespace tern
