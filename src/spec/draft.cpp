#include "spec/draft.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tern::spec {
namespace {

// Token ids per draft forward pass: a long prompt is prefilled in pieces, so
// the activations stay bounded.
constexpr size_t kMaxPassTokens = 512;
// A tree's leaf: the draft's probability of it at least this.
constexpr double kMinLeafProb = 0.1;

TokenId argmax(const float* row, int n) {
  return static_cast<TokenId>(std::max_element(row, row + n) - row);
}

// The w best tokens of a row, best first (ties: the lower id, as argmax).
std::vector<TokenId> best_of(const float* row, int n, int w) {
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  w = std::min(w, n);
  std::partial_sort(ids.begin(), ids.begin() + w, ids.end(), [&](TokenId a, TokenId b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  ids.resize(static_cast<size_t>(w));
  return ids;
}

}  // namespace

Status check_same_vocabulary(const gguf::GgufFile& draft, const gguf::GgufFile& target) {
  auto a = draft.get_array("tokenizer.ggml.tokens", gguf::ValueType::String);
  if (!a) return a.status().with_context("draft model (a draft needs the target's vocabulary)");
  auto b = target.get_array("tokenizer.ggml.tokens", gguf::ValueType::String);
  if (!b) return b.status().with_context("target model");
  const auto &da = (*a)->items, &tb = (*b)->items;
  if (da.size() != tb.size())
    return error(ErrorKind::InvalidArgument, "draft model: its vocabulary has " + std::to_string(da.size()) +
                                                 " tokens, the target's " + std::to_string(tb.size()) +
                                                 " (a draft must share the target's tokens)");
  for (size_t i = 0; i < da.size(); ++i) {
    const std::string *x = da[i].as_string(), *y = tb[i].as_string();
    if (!x || !y || *x != *y)
      return error(ErrorKind::InvalidArgument, "draft model: token " + std::to_string(i) + " is '" +
                                                   (x ? *x : std::string("?")) + "', the target's '" +
                                                   (y ? *y : std::string("?")) +
                                                   "' (a draft must share the target's tokens)");
  }
  return Status::ok();
}

Result<std::unique_ptr<DraftProposer>> DraftProposer::create(const std::string& draft_path,
                                                              const gguf::GgufFile& target,
                                                              std::shared_ptr<backend::Backend> backend, int max_seqs,
                                                              int32_t max_positions) {
  std::unique_ptr<DraftProposer> p(new DraftProposer());
  auto model = Model::load(draft_path, std::move(backend));
  if (!model) return model.status().with_context("draft model " + draft_path);
  p->model_ = std::move(model).value();
  TERN_RETURN_IF_ERROR(check_same_vocabulary(p->model_->file(), target).with_context(draft_path));
  // F16 keys/values in 16-token blocks: the pool is address space, touched as used.
  auto runner = BatchRunner::create(*p->model_, max_seqs, max_positions, KvType::F16, 16);
  if (!runner) return runner.status().with_context("draft model " + draft_path);
  p->runner_ = std::move(runner).value();
  p->max_positions_ = max_positions;
  p->fed_.resize(static_cast<size_t>(max_seqs));
  for (int s = max_seqs; s-- > 0;) p->free_slots_.push_back(s);
  return p;
}

int DraftProposer::slot_of(RequestId id) {
  if (auto it = slot_.find(id); it != slot_.end()) return it->second;
  if (free_slots_.empty()) return -1;
  const int s = free_slots_.back();
  free_slots_.pop_back();
  slot_[id] = s;
  return s;
}

int32_t DraftProposer::held(RequestId id) const {
  auto it = slot_.find(id);
  return it == slot_.end() ? 0 : static_cast<int32_t>(fed_[static_cast<size_t>(it->second)].size());
}

void DraftProposer::release(RequestId id) {
  auto it = slot_.find(id);
  if (it == slot_.end()) return;
  runner_->truncate(SeqId(it->second), 0);
  fed_[static_cast<size_t>(it->second)].clear();
  free_slots_.push_back(it->second);
  slot_.erase(it);
}

Status DraftProposer::run(std::vector<float>& logits) {
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = runner_->forward(batch_, logits);
  pass_cost_.observe(static_cast<int64_t>(batch_.size()),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  batch_.clear();
  return s;
}

Result<std::vector<TokenTree>> DraftProposer::propose(std::span<const DraftRequest> requests) {
  const int n_vocab = model_->hparams().n_vocab;
  std::vector<std::vector<TokenId>> out(requests.size());
  // Per request and depth: the draft's next choices after its greedy one.
  std::vector<std::vector<std::vector<TokenId>>> alts(requests.size());
  struct Active {
    size_t i;      // index into requests
    int slot;
    int32_t pos;   // position of the next token fed
    int k;         // proposals it gets (fewer than asked near the position limit)
  };
  std::vector<Active> active;
  // 1. Catch up: keep what the draft holds of each sequence, feed the rest;
  //    the last real token's logits give the first proposal.
  std::vector<size_t> want_row;  // request index of each logits row, in batch order
  std::vector<float> logits;
  auto flush = [&]() -> Status {
    if (batch_.size() == 0) return Status::ok();
    TERN_RETURN_IF_ERROR(run(logits));
    for (size_t r = 0; r < want_row.size(); ++r) {
      const float* row = logits.data() + r * static_cast<size_t>(n_vocab);
      const int width = requests[want_row[r]].width;
      if (width <= 1) {
        out[want_row[r]].push_back(argmax(row, n_vocab));
        continue;
      }
      std::vector<TokenId> best = best_of(row, n_vocab, width);
      out[want_row[r]].push_back(best.front());
      // Only choices the draft gives a fair chance: a leaf costs a verified
      // token and pays only when the target picks it (EAGLE-2's expansion by
      // the draft's confidence, one level deep).
      const float mx = row[best.front()];
      double sum = 0.0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
      std::vector<TokenId> keep;
      for (size_t j = 1; j < best.size(); ++j)
        if (std::exp(static_cast<double>(row[best[j]] - mx)) / sum >= kMinLeafProb) keep.push_back(best[j]);
      alts[want_row[r]].push_back(std::move(keep));
    }
    want_row.clear();
    return Status::ok();
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& q = requests[i];
    const int32_t n = static_cast<int32_t>(q.tokens.size());
    const int k = std::min<int>(q.k, max_positions_ - n);
    if (k <= 0 || n == 0) continue;
    const int slot = slot_of(q.id);
    if (slot < 0) continue;
    std::vector<TokenId>& fed = fed_[static_cast<size_t>(slot)];
    const size_t keep = static_cast<size_t>(
        std::mismatch(fed.begin(), fed.end(), q.tokens.begin(), q.tokens.end()).first - fed.begin());
    // The last real token is always fed again if held: its logits row is needed.
    const size_t from = std::min(keep, q.tokens.size() - 1);
    runner_->truncate(SeqId(slot), static_cast<int32_t>(from));
    fed.assign(q.tokens.begin(), q.tokens.end());
    for (size_t t = from; t < q.tokens.size(); ++t) {
      const bool last = t + 1 == q.tokens.size();
      batch_.add(q.tokens[t], static_cast<int32_t>(t), SeqId(slot), last);
      if (last) want_row.push_back(i);
      if (batch_.size() >= kMaxPassTokens) TERN_RETURN_IF_ERROR(flush());
    }
    active.push_back({i, slot, n, k});
  }
  TERN_RETURN_IF_ERROR(flush());
  // 2. Draft: each step feeds every active sequence's latest proposal.
  for (;;) {
    std::vector<Active> next;
    for (const Active& a : active) {
      if (static_cast<int>(out[a.i].size()) >= a.k) continue;
      const TokenId t = out[a.i].back();
      batch_.add(t, a.pos, SeqId(a.slot), true);
      fed_[static_cast<size_t>(a.slot)].push_back(t);
      want_row.push_back(a.i);
      next.push_back({a.i, a.slot, a.pos + 1, a.k});
    }
    if (next.empty()) break;
    TERN_RETURN_IF_ERROR(flush());
    active = std::move(next);
  }
  // The chain, then each depth's alternatives as leaves beside it.
  std::vector<TokenTree> trees(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    trees[i] = TokenTree::chain(out[i]);
    for (size_t d = 0; d < alts[i].size() && d < out[i].size(); ++d)
      for (TokenId t : alts[i][d]) {
        trees[i].tokens.push_back(t);
        trees[i].parents.push_back(static_cast<int32_t>(d) - 1);
      }
  }
  return trees;
}

}  // namespace tern::spec
