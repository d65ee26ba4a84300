#include "engine/speculator.h"

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "backend/backend.h"
#include "core/log.h"
#include "model/quantize.h"
#include "spec/ngram.h"

namespace tern {

namespace {
constexpr double kMinSpecGain = 1.1;
constexpr double kKeepSpecGain = 1.03;  // once on: a smaller margin keeps it on
constexpr double kPairAlpha = 0.05;     // weight of one verification in the pair's acceptance
constexpr double kIdleDrift = 0.2;      // per idle step, towards the pair's acceptance
}  // namespace

int choose_spec_k(double a, std::span<const double> cost, SpecPacing& pace, bool probe) {
  const int k_max = static_cast<int>(cost.size()) - 1;
  // Speculate only for a predicted gain of 10% or more: the costs are
  // estimates from a noisy clock, and a wrong "yes" costs more than a wrong
  // "no". Once on, 3% keeps it on, so noise does not flip it step to step.
  int best_k = 0;
  double best = pace.on ? kKeepSpecGain : kMinSpecGain, gain = 1.0, ak = 1.0;
  for (int k = 1; k <= k_max; ++k) {
    ak *= a;
    gain += ak;
    const double value = gain / cost[static_cast<size_t>(k)];
    if (value > best) best = value, best_k = k;
  }
  if (best_k > 0 || k_max == 0) {
    pace = SpecPacing{};
    pace.on = best_k > 0;
    return best_k;
  }
  pace.on = false;
  // Not worth it now: probe with one proposal after probe_every idle steps,
  // waiting twice as long after each probe that changed nothing (a probe of
  // a draft model feeds it every token since the last one) — unless even
  // proposals that are always right would not pay: then a probe cannot
  // change anything.
  if (!probe) return 0;
  bool could_pay = false;
  for (int k = 1; k <= k_max; ++k) could_pay |= (k + 1) / cost[static_cast<size_t>(k)] > kMinSpecGain;
  if (!could_pay) pace.probe_every = SpecPacing::kMaxProbeEvery;  // rarely: the costs may have been misjudged
  if (++pace.idle_steps < pace.probe_every) return 0;
  pace.idle_steps = 0;
  pace.probe_every = std::min(2 * pace.probe_every, SpecPacing::kMaxProbeEvery);
  return 1;
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
  for (const KvCacheSpec& k : target.kv_specs())
    if (k.kind == CacheKind::Recurrent)
      return error(ErrorKind::Unsupported, "speculative decoding needs a cache that can drop rejected tokens; '" +
                                               target.hparams().arch + "' keeps a recurrent state, which cannot " +
                                               "go back (run it without --spec)");
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

void Speculator::add(RequestId id, int request_k, int request_tree) {
  if (request_k == 0) return;
  State& st = state_[id];
  st.k_max = std::clamp(request_k < 0 ? config_.spec_k : request_k, 0, kMaxSpecTokens);
  st.width = std::clamp(request_tree < 0 ? config_.spec_tree : request_tree, 1, kMaxSpecTree);
  st.accept_rate = pair_accept_;
}

void Speculator::remove(RequestId id, std::span<const TokenId> tokens) {
  // The history only feeds proposals: when memory runs out adding to it, it goes without, so
  // that ending a request never fails (EngineCore::finish).
  if (config_.spec == SpecMethod::Ngram && state_.contains(id)) {
    try {
      suffixes_.add(tokens);
    } catch (const std::bad_alloc&) {
    }
  }
  state_.erase(id);
  if (draft_) draft_->release(id);
}

void Speculator::step(const SchedulerOutput& so, const RunnerOutput& ro, const std::vector<RequestUpdate>& updates,
                      Scheduler& scheduler, double exec_s) {
  cost_.observe(ro.n_tokens, exec_s);
  if (state_.empty()) return;
  for (size_t i = 0; i < so.chunks.size(); ++i) {
    const ScheduledChunk& c = so.chunks[i];
    if (c.n_spec == 0) continue;
    auto it = state_.find(c.id);
    if (it == state_.end()) continue;
    const int32_t accepted = ro.results[i].n_accepted - (c.n_tokens - c.n_spec);
    // Per position: a tree's first path comes first, so the depth kept is at most its length.
    const int32_t depth = it->second.chain > 0 ? std::min(c.n_spec, it->second.chain) : c.n_spec;
    const double rate = std::min(1.0, static_cast<double>(accepted) / depth);
    it->second.accept_rate = 0.7 * it->second.accept_rate + 0.3 * rate;
    pair_accept_ += kPairAlpha * (rate - pair_accept_);
  }
  // The next step's cost with k proposals per speculating sequence, relative
  // to its cost without: the tokens of this step that were not proposals,
  // plus k·W for each sequence that may speculate (W its tree's width).
  int32_t n_base = 0;
  for (const ScheduledChunk& c : so.chunks) n_base += c.n_tokens - c.n_spec;
  double n_spec_seqs = 0, n_verified = 0;  // sequences that may speculate; their tokens per position
  double sum_a = 0;
  for (const RequestUpdate& u : updates)
    if (auto it = state_.find(u.id); u.stop == StopReason::None && it != state_.end()) {
      n_spec_seqs += 1;
      n_verified += it->second.width;
      sum_a += it->second.accept_rate;
    }
  const double mean_a = n_spec_seqs > 0 ? sum_a / n_spec_seqs : 0.0;
  // A draft's passes against the target's step (its weight bytes over the
  // target's until timed): the first catches up on what the target accepted
  // (1 + a·k tokens per sequence), the other k - 1 draft one token each.
  const double t_base = cost_.seconds(n_base);
  const StepCost* dc = draft_ ? &draft_->pass_cost() : nullptr;
  const bool timed = dc && dc->seconds(1) > 0 && t_base > 0;
  std::vector<double> cost(kMaxSpecTokens + 1, 1.0);
  for (int k = 1; k <= kMaxSpecTokens; ++k) {
    double draft = 0.0;
    if (timed)
      draft = (dc->seconds(n_spec_seqs * (1.0 + mean_a * k)) + (k - 1) * dc->seconds(n_spec_seqs)) / t_base;
    else if (draft_)
      draft = draft_cost_ * k;
    cost[static_cast<size_t>(k)] = cost_.ratio(n_base, n_verified * k) + draft;
  }
  std::vector<spec::DraftRequest> drafts;
  for (const RequestUpdate& u : updates) {
    if (u.stop != StopReason::None) continue;
    auto it = state_.find(u.id);
    const SchedRequest* r = scheduler.find(u.id);
    if (it == state_.end() || !r) continue;
    State& st = it->second;
    const int width = st.width;
    const int k = config_.spec_adaptive
                      ? choose_spec_k(st.accept_rate, std::span(cost).first(static_cast<size_t>(st.k_max) + 1), st.pace,
                                      /*probe=*/config_.spec == SpecMethod::Ngram)
                      : st.k_max;
    if (k <= 0) {
      st.accept_rate += kIdleDrift * (pair_accept_ - st.accept_rate);
      continue;
    }
    if (config_.spec == SpecMethod::Ngram) {
      // What a finished request produced after the same tokens (repeated
      // traffic) first, then the sequence's own history (quoting its input):
      // one path for a chain, up to `width` different ones for a tree.
      const size_t max_nodes = static_cast<size_t>(k) * static_cast<size_t>(width);
      spec::TokenTree tree;
      int n_paths = 0;
      if (const std::vector<TokenId> p = suffixes_.propose(r->tokens, k); !p.empty()) {
        tree.add_path(p, max_nodes);
        ++n_paths;
      }
      if (n_paths < width)
        for (const auto& p : spec::propose_ngram_paths(r->tokens, k, width - n_paths, {config_.spec_ngram_max, 1}))
          tree.add_path(p, max_nodes);
      propose(scheduler, u.id, st, std::move(tree));
    }
    else if (!draft_failed_) {
      // A sequence the draft fell far behind (it stopped proposing while the
      // batch was large) stays without: catching up would cost the draft a
      // prefill of everything since. A prompt is caught up once, at the start.
      const int32_t held = draft_->held(u.id);
      if (held > 0 && static_cast<int32_t>(r->tokens.size()) - held > kMaxDraftBacklog) continue;
      spec::DraftRequest q{u.id, r->tokens, k};
      q.width = width;
      drafts.push_back(q);
    }
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
  for (size_t i = 0; i < drafts.size(); ++i) {
    auto it = state_.find(drafts[i].id);
    propose(scheduler, drafts[i].id, it->second, std::move((*proposals)[i]));
  }
}

void Speculator::propose(Scheduler& scheduler, RequestId id, State& st, spec::TokenTree tree) {
  // The first path's length: nodes parented one after another from the front.
  int chain = 0;
  while (chain < static_cast<int>(tree.size()) && tree.parents[static_cast<size_t>(chain)] == chain - 1) ++chain;
  st.chain = chain;
  if (chain == static_cast<int>(tree.size())) tree.parents.clear();  // a chain: the plain form
  scheduler.set_spec_tokens(id, std::move(tree.tokens), std::move(tree.parents));
}

}  // namespace tern
