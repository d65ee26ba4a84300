// engine/engine_core.h — the single-threaded step loop behind tern::Engine.
//
// One step is three calls:
//
//   SchedulerOutput so = scheduler.schedule();     which tokens of which requests run
//   RunnerOutput    ro = runner.execute(so);       one forward pass, then sampling
//   updates            = scheduler.update(so, ro); progress, stop conditions, KV commit
//
// and the core reports each request's new token ids (and its end) as
// CoreOutputs; text, stop strings and timing are the OutputProcessor's (on
// another thread in Engine). Who owns what:
//   Scheduler   request progress (tokens, n_computed), queues, budget, preemption
//   KvManager   block tables and valid lengths (allocate, commit, roll back)
//   ModelRunner samplers; the plain-data forward input of each step
// Requests are validated before they arrive (InputProcessor, const, any
// thread); everything else runs on the step thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "engine/input_processor.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/speculator.h"
#include "model/model.h"
#include "scheduler/kv_manager.h"
#include "scheduler/scheduler.h"
#include "tern/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern {

class EngineCore {
 public:
  static Result<std::unique_ptr<EngineCore>> create(const EngineConfig& config);
  ~EngineCore();

  const InputProcessor& input() const { return *input_; }
  // Validates and tokenises (the input processor's prepare()).
  Result<PreparedRequest> prepare(GenerationRequest request) const { return input_->prepare(std::move(request)); }
  // Queues a prepared request; its outputs come out of step(). False when
  // memory ran out while queueing it: nothing of it stays queued, and the
  // caller keeps it and tries again (nothing a user sent is lost).
  [[nodiscard]] bool add(RequestId id, const PreparedRequest& prepared);
  void cancel(RequestId id);
  void cancel_all();

  bool has_work() const;
  // One engine step; appends its outputs. An error here is internal (a bug
  // or exhausted memory): the requests of the failed step finish with Error.
  // When memory runs out inside the step (std::bad_alloc), every live request
  // finishes with Error and the step returns Unavailable; the core stays usable.
  // Never throws std::bad_alloc: when even ending them runs out, the requests
  // not yet ended stay live and the next step ends them before anything else.
  Status step(std::vector<CoreOutput>& out);

  EngineStats stats() const;
  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const KvManager& kv() const { return *kv_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  ModelRunner& runner() { return *runner_; }
  // The context limit in force (the model's, or EngineConfig::n_ctx).
  int32_t n_ctx() const { return n_ctx_; }
  // Positions one sequence can hold: min(n_ctx(), every position of the KV pool).
  int64_t max_seq_positions() const { return max_seq_positions_; }
  // Seconds since the core was created (the clock of CoreOutput::t_s).
  double now_s() const;
  std::string dump() const;

 private:
  EngineCore() = default;
  // Ends a request the scheduler knows: its final CoreOutput (merged into
  // `last` when given), its KV and sampler released. Whatever allocates comes
  // before anything changes: when it throws std::bad_alloc the request is
  // still live, as it was.
  void finish(RequestId id, FinishReason reason, std::vector<CoreOutput>& out, std::string_view error = {},
              CoreOutput* last = nullptr);
  void record_step(const SchedulerOutput& so, int64_t n_tokens);
  Status step_once(std::vector<CoreOutput>& out);
  void add_once(RequestId id, const PreparedRequest& prepared);
  // Ends every live request with Error and `message` (after a failed step),
  // outputs already decided (pending_) as they are. False when memory ran out
  // before all had ended: failing_ stays set and the next step() goes on.
  bool fail_all(std::string_view message, std::vector<CoreOutput>& out);
  // Moves pending_ into `out`, ending those requests.
  void deliver_pending(std::vector<CoreOutput>& out);
  // Sets constraint_vocab_: the vocabulary's pieces and trie for constrained requests, built
  // once when the engine is created.
  void build_constraint_vocab();

  EngineConfig config_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<KvManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<InputProcessor> input_;
  int32_t n_ctx_ = 0;
  int64_t max_seq_positions_ = 0;
  std::chrono::steady_clock::time_point t0_;

  std::unordered_set<RequestId> live_;       // added and not finished
  std::unordered_set<RequestId> cancelled_;  // to finish at the next step
  std::vector<CoreOutput> pending_;          // finished at add() (max_tokens 0): reported by the next step
  bool failing_ = false;  // a step ran out of memory and live requests are still to be ended
  // max_tokens 0 with prompt log-probabilities: run for one token, which is dropped.
  std::unordered_set<RequestId> score_only_;
  std::unique_ptr<Speculator> spec_;  // null: no speculative decoding
  std::shared_ptr<const grammar::TokenVocab> constraint_vocab_;
  int32_t next_seq_ = 0;

  // Counters for stats().
  int64_t n_steps_ = 0, n_tokens_stepped_ = 0, n_finished_ = 0;
  int64_t n_tokens_prompt_ = 0, n_tokens_generated_ = 0;
  int kv_blocks_peak_ = 0;
  int states_peak_ = 0;  // recurrent state slots held at once
  int64_t slots_sum_ = 0, used_sum_ = 0, running_sum_ = 0;
  int running_peak_ = 0;
  int64_t decode_steps_ = 0, decode_tokens_ = 0;
  int64_t spec_proposed_ = 0, spec_accepted_ = 0, spec_verifies_ = 0, spec_branch_accepted_ = 0;
  double decode_time_s_ = 0;
};

}  // namespace tern
