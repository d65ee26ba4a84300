// spec/draft.h — a draft model proposes: a smaller model sharing the
// target's vocabulary runs greedily k tokens ahead of each speculating
// sequence, all sequences batched in one pass per draft step.
//
// The draft keeps its own KV cache (a BatchRunner: one slot per sequence,
// paged in blocks of 16, pages touched only as used). It remembers the tokens
// it fed each slot; at the next proposal the common prefix with the
// sequence's real tokens stays, the rest (rejected proposals) is truncated,
// and the new real tokens are fed before drafting — so prompts are prefilled
// once and each step catches up on what the target accepted. Proposals are
// the draft's argmax: deterministic, which is what Sampler::verify's exact
// rejection sampling assumes (q is a point mass).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "model/batch_runner.h"
#include "model/model.h"
#include "spec/step_cost.h"
#include "spec/tree.h"

namespace tern::spec {

struct DraftRequest {
  RequestId id;
  std::span<const TokenId> tokens;  // the sequence so far (prompt + accepted output)
  int k = 0;                        // proposals wanted
  // Candidates per position: 1 a chain; W > 1 a token tree where each of the
  // k positions also gets the draft's next W - 1 choices as leaves, those it
  // gives a probability of at least 0.1 (no extra draft passes: the draft's
  // rows already rank them).
  int width = 1;
};

class DraftProposer {
 public:
  // Loads the draft and checks its vocabulary against the target file's
  // (token texts must be identical). max_seqs: sequences speculating at
  // once; max_positions: the longest sequence (plus proposals).
  static Result<std::unique_ptr<DraftProposer>> create(const std::string& draft_path, const gguf::GgufFile& target,
                                                        std::shared_ptr<backend::Backend> backend, int max_seqs,
                                                        int32_t max_positions);

  // Proposals for each request, in order: the greedy chain first (a request
  // may get fewer than k: none when its sequence would outgrow the draft's
  // positions or no slot is free), then the alternatives, depth by depth.
  Result<std::vector<TokenTree>> propose(std::span<const DraftRequest> requests);
  // The request ended: its slot is free.
  void release(RequestId id);
  // Tokens of the request's sequence whose K/V the draft holds (0: none, or no slot).
  int32_t held(RequestId id) const;

  // Bytes of draft weights read per draft token (for the cost of a proposal).
  uint64_t weight_bytes() const { return model_->weight_bytes(); }
  // The draft's own passes timed against their tokens (catch-up passes are
  // long, drafting passes one token per sequence).
  const StepCost& pass_cost() const { return pass_cost_; }
  const Model& model() const { return *model_; }

 private:
  DraftProposer() = default;
  int slot_of(RequestId id);  // -1 when every slot is taken
  Status run(std::vector<float>& logits);

  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchRunner> runner_;
  int32_t max_positions_ = 0;
  std::unordered_map<RequestId, int> slot_;
  std::vector<int> free_slots_;
  std::vector<std::vector<TokenId>> fed_;  // per slot: the tokens whose K/V the draft holds
  Batch batch_;
  StepCost pass_cost_;
};

// Identical token texts (tokenizer.ggml.tokens) in both files, else an error
// naming the first difference.
Status check_same_vocabulary(const gguf::GgufFile& draft, const gguf::GgufFile& target);

}  // namespace tern::spec
