// engine/speculator.h — speculative decoding's side of the step: after each
// step's update it learns from the verifications (each request's acceptance
// rate) and proposes the next tokens of every request still decoding, which
// the scheduler carries into the next step (SchedRequest::spec_tokens).
//
// Proposers: prompt lookup (spec/suffix_cache.h: what finished requests
// produced after the same three tokens first, then spec/ngram.h: the
// sequence's own history) or a draft model (spec/draft.h).
// How many per request (choose_k): the k maximising expected tokens per unit
// of cost, (1 + a + ... + a^k) / (1 + (c + d) k), with a the request's recent
// acceptance rate (an EMA), c the relative cost of one more verified token —
// small while decode is bandwidth-bound, growing with the batch as the step
// turns compute-bound — and d a draft token's cost relative to a target
// token (weight bytes read). k = 0 where it does not pay; such a request
// probes with one proposal every 16 steps. docs/spec.md.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "scheduler/scheduler.h"
#include "spec/draft.h"
#include "spec/suffix_cache.h"
#include "tern/engine.h"

namespace tern {

inline constexpr int kMaxSpecTokens = 16;  // proposals one sequence may carry in a step

// Exposed for tests: the k chosen for acceptance rate a, cap k_max, a batch
// of n_batch sequences and draft cost d (0 for prompt lookup).
int choose_spec_k(double a, int k_max, int n_batch, double d, int& idle_steps);

class Speculator {
 public:
  // null when config.spec is None. max_positions: the longest sequence.
  static Result<std::unique_ptr<Speculator>> create(const EngineConfig& config, const Model& target,
                                                    int32_t max_positions);

  // A request joins with its own cap (GenerationRequest::spec_k: -1 the
  // engine's, 0 none); leaves when it ends.
  void add(RequestId id, int request_k);
  // `tokens`: the finished sequence (prompt and output), which joins prompt
  // lookup's cross-request cache; empty when it ended without running.
  void remove(RequestId id, std::span<const TokenId> tokens = {});

  // After Scheduler::update: learn, then set the next proposals.
  void step(const SchedulerOutput& so, const RunnerOutput& ro, const std::vector<RequestUpdate>& updates,
            Scheduler& scheduler);

  double draft_time_s() const { return draft_time_s_; }

 private:
  struct State {
    int k_max = 0;
    double accept_rate = 0.7;
    int idle_steps = 0;  // steps that proposed nothing by choice
  };
  EngineConfig config_;
  std::unique_ptr<spec::DraftProposer> draft_;
  spec::SuffixCache suffixes_;  // prompt lookup: what finished requests produced
  double draft_cost_ = 0.0;  // d above
  bool draft_failed_ = false;
  std::unordered_map<RequestId, State> state_;
  double draft_time_s_ = 0.0;
};

}  // namespace tern
