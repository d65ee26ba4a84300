// engine/speculator.h — speculative decoding's side of the step: after each
// step's update it learns from the verifications (each request's acceptance
// rate) and proposes the next tokens of every request still decoding, which
// the scheduler carries into the next step (SchedRequest::spec_tokens).
//
// Proposers: prompt lookup (spec/suffix_cache.h: what finished requests
// produced after the same three tokens first, then spec/ngram.h: the
// sequence's own history) or a draft model (spec/draft.h).
// How many per request (choose_spec_k): the k maximising expected tokens per
// unit of cost, (1 + a + ... + a^k) / (T(k) + D(k)), with a the request's
// recent acceptance rate (an EMA), T(k) the step's time with k more tokens
// per speculating sequence (k·W with trees) over its time without, from
// the step times the engine measured (spec/step_cost.h: flat while
// decode is bandwidth-bound, steep once it turns compute-bound), and D(k)
// the draft's k passes of one token per speculating sequence over that step
// time (the draft times its passes too; before that, its weight bytes over
// the target's). k = 0 where it does not pay; with prompt lookup such a
// request probes with one proposal after 16 idle steps, then 32, 64, 128
// while probes change nothing — straight to 128 where even perfect
// proposals would not pay.
// docs/spec.md.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "spec/step_cost.h"
#include "scheduler/scheduler.h"
#include "spec/draft.h"
#include "spec/suffix_cache.h"
#include "spec/tree.h"
#include "tern/engine.h"

namespace tern {

inline constexpr int kMaxSpecTokens = 16;  // positions one sequence may propose ahead in a step
inline constexpr int kMaxSpecTree = 8;     // candidates per position in a token tree
inline constexpr int kMaxDraftBacklog = 32;  // tokens a draft may have to catch up on to propose again

// Exposed for tests: the k chosen for acceptance rate a (per position) and
// cost[k], a step's relative cost with k proposals (cost[0] = 1; k_max + 1
// entries).
struct SpecPacing {
  static constexpr int kMaxProbeEvery = 128;
  int idle_steps = 0;    // steps that proposed nothing by choice, since the last probe
  int probe_every = 16;  // doubles after each probe that did not turn speculation back on
  bool on = false;       // speculated last time: stays on down to a smaller predicted gain (hysteresis)
};
// probe: whether a request that chose none probes now and then (prompt
// lookup: a probe costs nothing; a draft model would first have to catch up
// on every token since its last proposal, so drafts never probe — their k
// comes back by itself when the costs fall, e.g. as the batch shrinks).
int choose_spec_k(double a, std::span<const double> cost, SpecPacing& pace, bool probe = true);

class Speculator {
 public:
  // null when config.spec is None. max_positions: the longest sequence.
  static Result<std::unique_ptr<Speculator>> create(const EngineConfig& config, const Model& target,
                                                    int32_t max_positions);

  // A request joins with its own cap and tree width (GenerationRequest::
  // spec_k: -1 the engine's, 0 none; spec_tree: -1 the engine's); leaves when it ends.
  void add(RequestId id, int request_k, int request_tree = -1);
  // `tokens`: the finished sequence (prompt and output), which joins prompt
  // lookup's cross-request cache; empty when it ended without running.
  void remove(RequestId id, std::span<const TokenId> tokens = {});

  // After Scheduler::update: learn, then set the next proposals.
  // exec_s: the forward pass's time (what the step cost model learns from).
  void step(const SchedulerOutput& so, const RunnerOutput& ro, const std::vector<RequestUpdate>& updates,
            Scheduler& scheduler, double exec_s);

  double draft_time_s() const { return draft_time_s_; }

 private:
  struct State {
    int k_max = 0;
    int width = 1;             // candidates per position
    double accept_rate = 0.7;  // of the positions proposed (a tree's depth); starts at the pair's
    SpecPacing pace;
    int chain = 0;       // the last proposal's first path: the depth of any prefix the scheduler kept
  };
  // Sets a request's proposal (a chain when the tree is one).
  void propose(Scheduler& scheduler, RequestId id, State& st, spec::TokenTree tree);
  EngineConfig config_;
  std::unique_ptr<spec::DraftProposer> draft_;
  spec::SuffixCache suffixes_;  // prompt lookup: what finished requests produced
  double draft_cost_ = 0.0;  // draft weight bytes over the target's: D's prior
  StepCost cost_;            // the target's steps
  // The proposer's acceptance over all requests (a slow EMA): where a new
  // request starts, and where a request that stopped proposing drifts back
  // to — its own estimate cannot move while it proposes nothing, so one
  // unlucky verification would otherwise switch it off for good.
  double pair_accept_ = 0.7;
  bool draft_failed_ = false;
  std::unordered_map<RequestId, State> state_;
  double draft_time_s_ = 0.0;
};

}  // namespace tern
