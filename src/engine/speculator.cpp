#include "engine/speculator.h"

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/backend.h"
#include "core/log.h"
#include "model/quantize.h"
#include "spec/ngram.h"

namespace tern {

int choose_spec_k(double a, int k_max, int n_batch, double d, int& idle_steps) {
  const double c = 0.08 * std::max(1.0, n_batch / 4.0) + d;
  int best_k = 0;
  double best = 1.0, gain = 1.0, ak = 1.0;
  for (int k = 1; k <= k_max; ++k) {
    ak *= a;
    gain += ak;
    const double value = gain / (1.0 + c * k);
    if (value > best) best = value, best_k = k;
  }
  if (best_k > 0 || k_max == 0) {
    idle_steps = 0;
    return best_k;
  }
  return ++idle_steps % 16 == 0 ? 1 : 0;
}

namespace {

// The model re-encoded at spec_self_type into a temporary file (removed by
// the caller once the draft has mapped it): one file on disk, loaded once.
Result<std::string> write_self_draft(const EngineConfig& config) {
  const QuantScheme* scheme = find_quant_scheme(config.spec_self_type);
  if (!scheme)
    return error(ErrorKind::InvalidArgument, "--draft self:" + config.spec_self_type + ": unknown type (known: " +
                                                 quant_scheme_names() + ")");
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/tern-self-draft-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return error(ErrorKind::IoError, "self-draft: cannot create a temporary file in " + path);
  ::close(fd);
  ThreadPool pool(config.n_threads > 0 ? config.n_threads : ThreadPool::default_threads());
  auto r = quantize_gguf(QuantizeOptions{config.model_path, path, *scheme}, pool);
  if (!r) {
    std::remove(path.c_str());
    return r.status().with_context("self-draft (" + config.spec_self_type + ")");
  }
  return path;
}

}  // namespace

Result<std::unique_ptr<Speculator>> Speculator::create(const EngineConfig& config, const Model& target,
                                                       int32_t max_positions) {
  if (config.spec == SpecMethod::None) return std::unique_ptr<Speculator>();
  std::unique_ptr<Speculator> s(new Speculator());
  s->config_ = config;
  std::string draft_path = config.spec_draft_path;
  if (config.spec == SpecMethod::SelfDraft) {
    auto path = write_self_draft(config);
    TERN_RETURN_IF_ERROR(path.status());
    draft_path = *path;
  }
  if (config.spec == SpecMethod::Draft || config.spec == SpecMethod::SelfDraft) {
    if (draft_path.empty())
      return error(ErrorKind::InvalidArgument, "speculative decoding with a draft model needs its path");
    auto draft = spec::DraftProposer::create(draft_path, target.file(),
                                             backend::make_backend(config.backend, config.n_threads),
                                             config.max_num_seqs, max_positions + kMaxSpecTokens);
    // A self-draft's file goes once mapped: the mapping keeps its pages.
    if (config.spec == SpecMethod::SelfDraft) std::remove(draft_path.c_str());
    TERN_RETURN_IF_ERROR(draft.status());
    s->draft_ = std::move(draft).value();
    s->draft_cost_ = target.weight_bytes() > 0 ? static_cast<double>(s->draft_->weight_bytes()) /
                                                     static_cast<double>(target.weight_bytes())
                                               : 0.0;
    TERN_LOG_INFO("spec: draft %s (%.1f%% of the target's weight bytes)",
                  config.spec == SpecMethod::SelfDraft ? ("self:" + config.spec_self_type).c_str() : draft_path.c_str(),
                  100.0 * s->draft_cost_);
  }
  return s;
}

void Speculator::add(RequestId id, int request_k) {
  if (request_k == 0) return;
  state_[id].k_max = std::clamp(request_k < 0 ? config_.spec_k : request_k, 0, kMaxSpecTokens);
}

void Speculator::remove(RequestId id, std::span<const TokenId> tokens) {
  if (config_.spec == SpecMethod::Ngram && state_.contains(id)) suffixes_.add(tokens);
  state_.erase(id);
  if (draft_) draft_->release(id);
}

void Speculator::step(const SchedulerOutput& so, const RunnerOutput& ro, const std::vector<RequestUpdate>& updates,
                      Scheduler& scheduler) {
  if (state_.empty()) return;
  for (size_t i = 0; i < so.chunks.size(); ++i) {
    const ScheduledChunk& c = so.chunks[i];
    if (c.n_spec == 0) continue;
    auto it = state_.find(c.id);
    if (it == state_.end()) continue;
    const int32_t accepted = ro.results[i].n_accepted - (c.n_tokens - c.n_spec);
    it->second.accept_rate = 0.7 * it->second.accept_rate + 0.3 * accepted / c.n_spec;
  }
  const int n_batch = static_cast<int>(so.chunks.size());
  std::vector<spec::DraftRequest> drafts;
  for (const RequestUpdate& u : updates) {
    if (u.stop != StopReason::None) continue;
    auto it = state_.find(u.id);
    const SchedRequest* r = scheduler.find(u.id);
    if (it == state_.end() || !r) continue;
    State& st = it->second;
    const int k = config_.spec_adaptive ? choose_spec_k(st.accept_rate, st.k_max, n_batch, draft_cost_, st.idle_steps)
                                        : st.k_max;
    if (k <= 0) continue;
    if (config_.spec == SpecMethod::Ngram) {
      // What a finished request produced after the same tokens (repeated
      // traffic), else the sequence's own history (quoting its input).
      std::vector<TokenId> p = suffixes_.propose(r->tokens, k);
      if (p.empty()) p = spec::propose_ngram(r->tokens, k, {config_.spec_ngram_max, 1});
      scheduler.set_spec_tokens(u.id, std::move(p));
    }
    else if (!draft_failed_)
      drafts.push_back({u.id, r->tokens, k});
  }
  if (drafts.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  auto proposals = draft_->propose(drafts);
  draft_time_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!proposals) {
    // The target's output does not depend on proposals: go on without them.
    TERN_LOG_WARN("spec: the draft model failed (%s); speculation is off from here", proposals.status().message().c_str());
    draft_failed_ = true;
    return;
  }
  for (size_t i = 0; i < drafts.size(); ++i) scheduler.set_spec_tokens(drafts[i].id, std::move((*proposals)[i]));
}

}  // namespace tern
