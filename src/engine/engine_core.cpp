#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "core/assert.h"
#include "core/format_bytes.h"
#include "core/log.h"
#include "core/memory_info.h"
#include "engine/kv_budget.h"
#include "engine/streaming.h"

namespace tern {
namespace {

// An explicit context (-c) must fit at least one sequence in the pool: else
// every long request would be cut at the pool's edge with no hint why. (The
// model's own context, the default, is capped to the pool silently.)
Status check_context_fits_pool(const EngineConfig& config, uint64_t block_bytes, int n_blocks) {
  if (config.n_ctx <= 0) return Status::ok();
  const int64_t n_needed = (static_cast<int64_t>(config.n_ctx) + config.block_size - 1) / config.block_size;
  if (n_needed <= n_blocks) return Status::ok();
  return error(ErrorKind::InvalidArgument,
               "a context of " + std::to_string(config.n_ctx) + " tokens needs " + std::to_string(n_needed) +
                   " KV blocks (" + format_bytes(n_needed * block_bytes) + ") but the pool holds " +
                   std::to_string(n_blocks) + " (" + format_bytes(n_blocks * block_bytes) +
                   "), not even one sequence; lower -c or raise --kv-memory");
}

// Prompt-state snapshots of recurrent layers every 8 blocks (128 positions of
// 16): a shared 1,000-token prefix recomputes at most 127 of them, and a
// snapshot (~7 MiB for a 1024-wide, 48-layer Mamba) costs ~0.3 ms to take.
constexpr int kStateSnapshotBlocks = 8;
constexpr int kMinStateSnapshots = 16;

// The bytes a KV or state pool may take: --kv-memory (checked against the
// memory available now: without that a busy server would find out through the
// OOM killer), else its fraction of RAM. `what` names the pool in errors.
Result<int64_t> pool_budget_bytes(const EngineConfig& config, const std::string& what) {
  if (config.kv_memory_bytes > 0) {
    TERN_RETURN_IF_ERROR(check_kv_fits_memory(static_cast<uint64_t>(config.kv_memory_bytes), what + " of --kv-memory",
                                              "lower --kv-memory or give a fraction of it such as 0.5"));
    return config.kv_memory_bytes;
  }
  if (config.kv_memory_fraction <= 0 || config.kv_memory_fraction > 1)
    return error(ErrorKind::InvalidArgument, "KV memory fraction must be in (0, 1]");
  return static_cast<int64_t>(config.kv_memory_fraction * static_cast<double>(available_memory_bytes()));
}

// Bytes of one sequence's state across every recurrent group (F32).
uint64_t state_slot_bytes_of(const std::vector<KvCacheSpec>& specs) {
  uint64_t n = 0;
  for (const KvCacheSpec& s : specs)
    if (s.kind == CacheKind::Recurrent) n += static_cast<uint64_t>(s.n_layer) * s.row_bytes();
  return n;
}

// Bytes of one block across every attention group (they allocate in lockstep).
uint64_t block_bytes_of(const std::vector<KvCacheSpec>& specs, int block_size) {
  uint64_t n = 0;
  for (const KvCacheSpec& s : specs)
    if (s.kind != CacheKind::Recurrent)
      n += paged_kv_block_bytes(KvShape{s.n_layer, s.n_kv_head, s.head_dim, s.type}, block_size);
  return n;
}

// Running sequences a model's recurrent state slots allow: max_num_seqs, or
// fewer when that many states (slot_bytes each) would pass the memory a KV
// pool may take (--kv-memory, else its fraction of RAM). A model with
// attention layers (block_bytes > 0) keeps one slot per running sequence (its
// KV blocks are the budget). Fewer slots than max_num_seqs: requests wait for
// one, and the priority policy preempts for one (docs/ssm.md).
Result<int> state_slots(const EngineConfig& config, uint64_t slot_bytes, uint64_t block_bytes) {
  if (slot_bytes == 0 || block_bytes > 0 || config.kv_exact_contexts) return config.max_num_seqs;
  auto bytes = pool_budget_bytes(config, "a state pool");
  TERN_RETURN_IF_ERROR(bytes.status());
  const double budget = static_cast<double>(*bytes);
  const double n = std::floor(budget / static_cast<double>(slot_bytes));
  if (n < 1)
    return error(ErrorKind::InvalidArgument, "one sequence's recurrent state takes " + format_bytes(slot_bytes) +
                                                 ", more than the " + format_bytes(static_cast<uint64_t>(budget)) +
                                                 " the state pool may take; raise --kv-memory");
  return static_cast<int>(std::min<double>(n, config.max_num_seqs));
}

FinishReason finish_reason_of(StopReason s) {
  switch (s) {
    case StopReason::StopToken: return FinishReason::Eos;
    case StopReason::Context: return FinishReason::Context;
    case StopReason::Length:
    case StopReason::None: break;
  }
  return FinishReason::Length;
}

// The KV pool's size in blocks: --kv-memory bytes, or a fraction of the
// memory available capped at what max_num_seqs full contexts could fill,
// less `reserved` (a hybrid's state pool, which shares the budget).
Result<int> pool_blocks(const EngineConfig& config, uint64_t block_bytes, int32_t n_ctx, uint64_t reserved) {
  const int64_t per_seq = (static_cast<int64_t>(n_ctx) + config.block_size - 1) / config.block_size;
  if (config.kv_exact_contexts) {
    const int64_t n = per_seq * std::max(1, config.max_num_seqs);
    TERN_RETURN_IF_ERROR(check_kv_fits_memory(static_cast<uint64_t>(n) * block_bytes,
                                              "a KV cache for a context of " + std::to_string(n_ctx) + " tokens",
                                              "lower the context size (-c)"));
    if (n > INT32_MAX / 2) return error(ErrorKind::InvalidArgument, "a context of " + std::to_string(n_ctx) + " tokens is too large");
    return static_cast<int>(n);
  }
  auto budget = pool_budget_bytes(config, "a KV pool");
  TERN_RETURN_IF_ERROR(budget.status());
  const int64_t bytes = *budget - static_cast<int64_t>(reserved);
  if (reserved > 0 && bytes < static_cast<int64_t>(block_bytes))
    return error(ErrorKind::InvalidArgument, "KV memory of " + format_bytes(static_cast<uint64_t>(*budget)) +
                                                 " leaves no room for KV blocks after the recurrent states' " +
                                                 format_bytes(reserved) + " (--max-num-seqs running sequences and " +
                                                 "their prompt snapshots); raise --kv-memory or lower --max-num-seqs");
  int64_t n_blocks = block_bytes == 0 ? 0 : bytes / static_cast<int64_t>(block_bytes);
  if (config.kv_memory_bytes <= 0) {
    // A fraction of RAM can far exceed what max_num_seqs full contexts could
    // ever fill (and each block costs bookkeeping): cap the default there.
    n_blocks = std::min<int64_t>(n_blocks, per_seq * std::max(1, config.max_num_seqs));
  }
  n_blocks = std::min<int64_t>(n_blocks, INT32_MAX / 2);
  if (n_blocks < 1)
    return error(ErrorKind::InvalidArgument, "KV memory of " + std::to_string(bytes) + " bytes is less than one block (" +
                                                 std::to_string(block_bytes) + " bytes); raise --kv-memory");
  return static_cast<int>(n_blocks);
}

// --max-rss: the KV memory left once the weights (packed copies and what is
// read in place, counted whole), the rest of the process as it is now and an
// estimate of one step's activations are counted, less a margin for the
// allocator and threads. Capped at max_num_seqs full contexts (and at
// --kv-memory when given); refused when not even one context fits.
Result<int64_t> kv_bytes_under_max_rss(const EngineConfig& config, const Model& model, int32_t n_ctx,
                                       uint64_t block_bytes) {
  const HParams& hp = model.hparams();
  const int64_t weights = static_cast<int64_t>(model.packed_bytes() + model.in_place_bytes());
  // Resident now, less the weights' pages already in it (counted above in full).
  const int64_t process = std::max<int64_t>(0, resident_bytes() - static_cast<int64_t>(model.packed_bytes()));
  const int64_t activations =
      4 * (static_cast<int64_t>(config.max_batched_tokens) * (8 * hp.n_embd + 3 * std::max(hp.n_ff, hp.n_embd)) +
           2 * static_cast<int64_t>(config.max_num_seqs) * hp.n_vocab);
  constexpr int64_t kMargin = int64_t{16} << 20;
  const int64_t left = config.max_rss_bytes - weights - process - activations - kMargin;
  const int64_t per_seq = (static_cast<int64_t>(n_ctx) + config.block_size - 1) / config.block_size *
                          static_cast<int64_t>(block_bytes);
  if (left < per_seq) {
    const auto size = [](int64_t b) { return format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, b))); };
    return error(ErrorKind::InvalidArgument,
                 "--max-rss " + size(config.max_rss_bytes) + " leaves " + size(left) + " for the KV cache after the weights (" +
                     size(weights) + "), the rest of the process (" + size(process) + "), one step's activations (~" +
                     size(activations) + ") and a 16 MiB margin: less than one sequence's context of " +
                     std::to_string(n_ctx) + " tokens (" + size(per_seq) +
                     "); raise --max-rss, lower -c or --max-batched-tokens");
  }
  int64_t kv = std::min(left, per_seq * std::max(1, config.max_num_seqs));
  if (config.kv_memory_bytes > 0) kv = std::min(kv, config.kv_memory_bytes);
  TERN_LOG_INFO("engine: --max-rss %s: KV cache %s (weights %s, process %s, activations ~%s)",
                format_bytes(static_cast<uint64_t>(config.max_rss_bytes)).c_str(), format_bytes(static_cast<uint64_t>(kv)).c_str(),
                format_bytes(static_cast<uint64_t>(weights)).c_str(), format_bytes(static_cast<uint64_t>(process)).c_str(),
                format_bytes(static_cast<uint64_t>(activations)).c_str());
  return kv;
}

}  // namespace

EngineCore::~EngineCore() = default;

Result<std::unique_ptr<EngineCore>> EngineCore::create(const EngineConfig& config_in) {
  std::unique_ptr<EngineCore> core(new EngineCore());
  EngineConfig config = config_in;  // --max-rss sets the KV memory below
  core->config_ = config;
  if (config.max_rss_bytes < 0) return error(ErrorKind::InvalidArgument, "--max-rss must be >= 0 (0: no bound)");
  if (config.block_size < 1 || config.block_size > 1024)
    return error(ErrorKind::InvalidArgument, "block size must be in [1, 1024]");
  if (config.max_num_seqs < 1) return error(ErrorKind::InvalidArgument, "max_num_seqs must be >= 1");
  if (config.spec_tree < 1 || config.spec_tree > kMaxSpecTree)
    return error(ErrorKind::InvalidArgument, "spec_tree (candidates per position) must be in 1.." + std::to_string(kMaxSpecTree));
  if (config.max_batched_tokens < 1) return error(ErrorKind::InvalidArgument, "max_batched_tokens must be >= 1");

  auto model = Model::load(config.model_path, backend::make_backend(config.backend, config.n_threads),
                           MapOptions{config.use_mmap});
  TERN_RETURN_IF_ERROR(model.status());
  core->model_ = std::move(model).value();
  if (config.mlock) {
    auto locked = core->model_->lock_memory();
    TERN_RETURN_IF_ERROR(locked.status());
    TERN_LOG_INFO("engine: %s of weights locked in memory", format_bytes(*locked).c_str());
  }
  auto tokenizer = Tokenizer::from_gguf(core->model_->file());
  TERN_RETURN_IF_ERROR(tokenizer.status());
  core->tokenizer_ = std::move(tokenizer).value();
  // Built now rather than at the first constrained request, whose first token
  // would otherwise wait for it (~30 ms for a 32k vocabulary).
  core->build_constraint_vocab();
  const HParams& hp = core->model_->hparams();
  core->n_ctx_ = config.n_ctx > 0 ? config.n_ctx : hp.n_ctx_train;
  warn_past_training_context(hp, core->n_ctx_);

  std::vector<KvCacheSpec> specs = core->model_->kv_specs(config.kv_type);
  const uint64_t block_bytes = block_bytes_of(specs, config.block_size);
  const uint64_t state_slot_bytes = state_slot_bytes_of(specs);
  if (config.max_rss_bytes > 0) {
    auto kv = kv_bytes_under_max_rss(config, *core->model_, core->n_ctx_, block_bytes);
    TERN_RETURN_IF_ERROR(kv.status());
    config.kv_memory_bytes = *kv;
    core->config_.kv_memory_bytes = *kv;
  }
  auto n_states = state_slots(config, state_slot_bytes, block_bytes);
  TERN_RETURN_IF_ERROR(n_states.status());
  // Recurrent layers: prompt-state snapshots one every kStateSnapshotBlocks
  // blocks of a prompt, as many as running sequences but at least
  // kMinStateSnapshots (one prompt of 1,024 tokens takes 8) (docs/ssm.md).
  const int n_snapshots = config.prefix_caching ? std::max(config.max_num_seqs, kMinStateSnapshots) : 0;
  // A hybrid's states (running slots and snapshots) come out of the KV budget.
  const uint64_t reserved = block_bytes > 0 && !config.kv_exact_contexts
                                ? state_slot_bytes * static_cast<uint64_t>(*n_states + n_snapshots)
                                : 0;
  // A model without attention layers (state-space only) keeps no KV blocks:
  // the count is bookkeeping, as if every sequence could reach the context.
  auto n_blocks = block_bytes == 0 ? Result<int>(static_cast<int>(std::min<int64_t>(
                                         (static_cast<int64_t>(core->n_ctx_) + config.block_size - 1) /
                                             config.block_size * std::max(1, config.max_num_seqs),
                                         INT32_MAX / 2)))
                                   : pool_blocks(config, block_bytes, core->n_ctx_, reserved);
  TERN_RETURN_IF_ERROR(n_blocks.status());
  TERN_RETURN_IF_ERROR(check_context_fits_pool(config, block_bytes, *n_blocks));
  KvManagerConfig kc;
  kc.n_blocks = *n_blocks;
  kc.block_size = config.block_size;
  kc.prefix_caching = config.prefix_caching;
  kc.swap_compression = config.swap_compression;
  kc.n_state_slots = *n_states;
  kc.n_snapshot_slots = n_snapshots;
  kc.snapshot_interval = kStateSnapshotBlocks * config.block_size;
  auto kv = KvManager::create(std::move(specs), kc);
  TERN_RETURN_IF_ERROR(kv.status());
  core->kv_ = std::move(kv).value();
  core->max_seq_positions_ = std::min<int64_t>(core->n_ctx_, static_cast<int64_t>(*n_blocks) * config.block_size);

  SchedulerConfig sc;
  sc.policy = config.policy;
  sc.preemption = config.preemption;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_batched_tokens = config.max_batched_tokens;
  sc.watermark = config.watermark;
  sc.ageing_per_s = config.ageing_per_s;
  for (const auto& [tenant, w] : config.tenant_weights) {
    if (!(w > 0)) return error(ErrorKind::InvalidArgument, "tenant weight for '" + tenant + "' must be > 0");
    sc.tenant_weights[tenant] = w;
  }
  core->scheduler_ = std::make_unique<Scheduler>(sc);
  core->runner_ = std::make_unique<ModelRunner>(*core->model_, *core->kv_, static_cast<int32_t>(core->max_seq_positions_));
  auto spec = Speculator::create(config, *core->model_, static_cast<int32_t>(core->max_seq_positions_));
  TERN_RETURN_IF_ERROR(spec.status());
  core->spec_ = std::move(spec).value();
  InputLimits limits;
  limits.n_vocab = hp.n_vocab;
  limits.n_ctx = core->n_ctx_;
  limits.streaming = config.streaming;
  limits.kv_evict = config.kv_evict;
  limits.max_positions = core->max_seq_positions_;
  limits.n_blocks_total = *n_blocks;  // a state-space model's are nominal: positions, not memory
  limits.block_size = config.block_size;
  core->input_ = std::make_unique<InputProcessor>(*core->tokenizer_, limits);
  core->t0_ = std::chrono::steady_clock::now();
  return core;
}

double EngineCore::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

bool EngineCore::add(RequestId id, const PreparedRequest& p) {
  try {
    add_once(id, p);
    return true;
  } catch (const std::bad_alloc&) {
    // Memory ran out while queueing it: undo what was queued (none of this allocates) and let
    // the caller try again.
    const SchedRequest* r = scheduler_->find(id);
    if (spec_) spec_->remove(id, {});
    if (r) scheduler_->remove(id, *kv_);
    runner_->remove_request(id);
    score_only_.erase(id);
    std::erase_if(pending_, [&](const CoreOutput& o) { return o.id == id; });
    if (live_.erase(id) > 0) n_tokens_prompt_ -= static_cast<int64_t>(p.prompt.size());
    return false;
  }
}

void EngineCore::add_once(RequestId id, const PreparedRequest& p) {
  const double now = now_s();
  const GenerationRequest& g = p.request;
  live_.insert(id);
  n_tokens_prompt_ += static_cast<int64_t>(p.prompt.size());
  const bool score_only = g.max_tokens == 0 && (g.prompt_logprobs >= 0 || g.embed != Pooling::None);
  if (g.max_tokens == 0 && !score_only) {  // nothing to generate: it ends at the next step
    CoreOutput o;
    o.id = id;
    o.finish = FinishReason::Length;
    o.t_s = now;
    o.n_tokens_prompt = static_cast<int32_t>(p.prompt.size());
    pending_.push_back(std::move(o));
    return;
  }
  SchedRequest r;
  r.id = id;
  r.seq = SeqId(next_seq_);
  next_seq_ = next_seq_ == INT32_MAX ? 0 : next_seq_ + 1;
  r.priority = g.priority;
  r.tenant = g.tenant;
  r.arrival_s = now;
  r.n_prompt = static_cast<int32_t>(p.prompt.size());
  r.n_tokens = r.n_prompt;
  r.max_tokens = score_only ? 1 : g.max_tokens;
  r.compute_prompt = g.prompt_logprobs >= 0 || g.embed == Pooling::Mean;
  if (score_only) score_only_.insert(id);
  r.max_positions = static_cast<int32_t>(std::min<int64_t>(max_seq_positions_, INT32_MAX));
  r.window = p.window;
  if (r.window.active()) r.max_positions = static_cast<int32_t>(kMaxStreamingPositions);
  r.tokens = p.prompt;
  r.stop_token_ids = p.stop_token_ids;
  RunnerRequest rr;
  rr.sampling = g.sampling;
  rr.n_logprobs = g.n_logprobs;
  rr.n_prompt_logprobs = g.prompt_logprobs;
  rr.embed = g.embed;
  rr.embed_normalize = g.embed_normalize;
  rr.prompt = p.prompt;
  rr.logit_bias = g.logit_bias;
  if (p.grammar) {
    rr.grammar = p.grammar;
    rr.vocab = constraint_vocab_;
    rr.end_ids = p.stop_token_ids;
  }
  runner_->add_request(id, rr);
  scheduler_->add(std::move(r));
  // A streaming sequence is not speculated (a draft's own cache keeps everything; rollback needs every block).
  if (spec_) spec_->add(id, r.window.active() || r.window.evicting() ? 0 : g.spec_k, g.spec_tree);
}

void EngineCore::build_constraint_vocab() {
  std::vector<std::string> pieces(static_cast<size_t>(model_->hparams().n_vocab));
  for (size_t t = 0; t < pieces.size(); ++t) pieces[t] = tokenizer_->token_to_piece(static_cast<TokenId>(t));
  constraint_vocab_ = std::make_shared<const grammar::TokenVocab>(std::move(pieces));
}

void EngineCore::cancel(RequestId id) { cancelled_.insert(id); }

void EngineCore::cancel_all() {
  for (RequestId id : live_) cancelled_.insert(id);
}

bool EngineCore::has_work() const { return !live_.empty() || !pending_.empty(); }

void EngineCore::finish(RequestId id, FinishReason reason, std::vector<CoreOutput>& out, std::string_view error_message,
                        CoreOutput* last) {
  // What may allocate first, while nothing has changed: a failure leaves the request live.
  CoreOutput o = last ? std::move(*last) : CoreOutput{};
  o.id = id;
  o.finish = reason;
  o.error.assign(error_message);
  o.t_s = now_s();
  if (out.size() == out.capacity()) out.reserve(std::max<size_t>(16, 2 * out.size()));
  // From here nothing allocates.
  const SchedRequest* r = scheduler_->find(id);
  // Before the scheduler forgets the tokens (prompt lookup keeps them).
  if (spec_) spec_->remove(id, r ? std::span<const TokenId>(r->tokens) : std::span<const TokenId>());
  if (r) {
    o.n_tokens_prompt = r->n_prompt;
    o.n_tokens_cached = std::max(0, r->n_cached);
    o.n_preemptions = r->n_preemptions;
    const int32_t n_generated = r->n_tokens - r->n_prompt;
    scheduler_->remove(id, *kv_);
    scheduler_->record_output_length(n_generated);
  }
  runner_->remove_request(id);
  live_.erase(id);
  score_only_.erase(id);
  ++n_finished_;
  out.push_back(std::move(o));
}

void EngineCore::deliver_pending(std::vector<CoreOutput>& out) {
  if (pending_.empty()) return;
  out.reserve(out.size() + pending_.size());  // the only allocation, before anything changes
  for (CoreOutput& o : pending_) {
    live_.erase(o.id);
    scheduler_->record_output_length(0);
    ++n_finished_;
    out.push_back(std::move(o));
  }
  pending_.clear();
}

bool EngineCore::fail_all(std::string_view message, std::vector<CoreOutput>& out) {
  failing_ = true;
  try {
    deliver_pending(out);
    while (!live_.empty()) finish(*live_.begin(), FinishReason::Error, out, message);
  } catch (const std::bad_alloc&) {
    return false;  // those not ended stay live; the next step goes on with them
  }
  cancelled_.clear();
  failing_ = false;
  return true;
}

namespace {
constexpr std::string_view kStepOutOfMemory = "out of memory during an engine step";
}  // namespace

Status EngineCore::step(std::vector<CoreOutput>& out) {
  // A short message: it fits std::string's inline buffer, so returning it allocates nothing.
  const auto out_of_memory = [] { return Status(ErrorKind::Unavailable, "out of memory"); };
  if (failing_) {  // an earlier step ran out of memory before it had ended every request
    if (!fail_all(kStepOutOfMemory, out)) return out_of_memory();
    return Status::ok();
  }
  try {
    return step_once(out);
  } catch (const std::bad_alloc&) {
    // Memory ran out part-way through the step, so which request it left half-updated is not
    // known: every live request ends with Error, giving back its KV blocks and sampler, and the
    // engine goes on serving what arrives next. Requests queued before they have all ended
    // (memory still short) end with Error too.
    fail_all(kStepOutOfMemory, out);
    return out_of_memory();
  }
}

Status EngineCore::step_once(std::vector<CoreOutput>& out) {
  // Whatever fails from here (std::bad_alloc), fail_all() ends every request still live.
  deliver_pending(out);
  if (!cancelled_.empty()) {
    std::vector<RequestId> ids(cancelled_.begin(), cancelled_.end());
    cancelled_.clear();
    for (RequestId id : ids)
      if (live_.contains(id)) finish(id, FinishReason::Cancelled, out);
  }
  const double t_step = now_s();
  const SchedulerOutput so = scheduler_->schedule(*kv_, t_step);  // 1. plan
  if (so.chunks.empty()) return Status::ok();
  auto ro = runner_->execute(so, *scheduler_);                     // 2. run
  const double exec_s = now_s() - t_step;
  if (!ro.is_ok()) {
    for (const ScheduledChunk& c : so.chunks)
      if (live_.contains(c.id)) finish(c.id, FinishReason::Error, out, ro.status().message());
    return ro.status();
  }
  bool decode_only = true;  // every chunk one real token past its prompt (plus proposals)
  for (const ScheduledChunk& c : so.chunks) {
    const SchedRequest* r = scheduler_->find(c.id);
    decode_only = decode_only && c.n_tokens - c.n_spec == 1 && r->n_computed >= r->n_prompt;
  }
  const std::vector<RequestUpdate> updates = scheduler_->update(so, ro->results, *kv_);  // 3. progress
  record_step(so, ro->n_tokens);
  spec_proposed_ += ro->n_spec_proposed;
  spec_verifies_ += ro->n_spec_verifies;
  spec_accepted_ += ro->n_spec_accepted;
  spec_branch_accepted_ += ro->n_spec_branch_accepted;

  std::unordered_map<RequestId, size_t> chunk_of;
  for (size_t i = 0; i < so.chunks.size(); ++i) chunk_of[so.chunks[i].id] = i;
  const double now = now_s();
  for (const RequestUpdate& u : updates) {
    const SchedRequest& r = *scheduler_->find(u.id);
    CoreOutput o;
    o.id = u.id;
    o.tokens = u.new_tokens;
    o.t_s = now;
    o.n_tokens_prompt = r.n_prompt;
    o.n_tokens_cached = std::max(0, r.n_cached);
    o.n_preemptions = r.n_preemptions;
    const std::vector<TokenLogprobs>& lps = ro->logprobs[chunk_of.at(u.id)];
    for (size_t i = 0; i < lps.size() && i < o.tokens.size(); ++i) {
      o.logprobs.push_back(lps[i].logprob);
      o.top_logprobs.push_back(lps[i].top);
    }
    o.prompt_logprobs = std::move(ro->prompt_logprobs[chunk_of.at(u.id)]);
    o.embedding = std::move(ro->embeddings[chunk_of.at(u.id)]);
    if (score_only_.contains(u.id)) {
      // The prompt is scored; the token it ran for was not asked for.
      o.tokens.clear();
      o.logprobs.clear();
      o.top_logprobs.clear();
      finish(u.id, FinishReason::Length, out, {}, &o);
      continue;
    }
    n_tokens_generated_ += static_cast<int64_t>(o.tokens.size());
    if (u.stop == StopReason::None)
      out.push_back(std::move(o));
    else
      finish(u.id, finish_reason_of(u.stop), out, {}, &o);
  }
  if (spec_) spec_->step(so, *ro, updates, *scheduler_, exec_s);
  if (decode_only) {
    ++decode_steps_;
    decode_tokens_ += static_cast<int64_t>(so.chunks.size());
    decode_time_s_ += now_s() - t_step;
  }
  return Status::ok();
}

// Step counters and memory-use figures over the sequences that ran.
void EngineCore::record_step(const SchedulerOutput& so, int64_t n_tokens) {
  ++n_steps_;
  n_tokens_stepped_ += n_tokens;
  const int blocks_used = kv_->has_blocks() ? kv_->blocks().n_blocks_used() : 0;
  kv_blocks_peak_ = std::max(kv_blocks_peak_, blocks_used);
  states_peak_ = std::max(states_peak_, kv_->n_state_slots_used());
  int64_t used = 0;
  for (const ScheduledChunk& c : so.chunks)
    if (const SchedRequest* r = scheduler_->find(c.id)) used += r->n_computed;
  slots_sum_ += static_cast<int64_t>(blocks_used) * kv_->block_size();
  used_sum_ += used;
  running_sum_ += static_cast<int64_t>(so.chunks.size());
  running_peak_ = std::max(running_peak_, static_cast<int>(so.chunks.size()));
}

EngineStats EngineCore::stats() const {
  EngineStats st;
  const SchedulerStats ss = scheduler_->stats();
  st.n_waiting = ss.n_waiting;
  st.n_running = ss.n_running;
  st.n_swapped = ss.n_swapped;
  st.n_preemptions = ss.n_preemptions;
  st.n_swaps_lost = ss.n_swaps_lost;
  st.prefix_lookup_tokens = kv_->snapshot_lookup_tokens();  // state-space layers only; blocks' below
  st.prefix_hit_tokens = kv_->snapshot_hit_tokens();
  if (kv_->has_blocks()) {
    const BlockManager& bm = kv_->blocks();
    st.kv_blocks_total = bm.n_blocks_total();
    st.kv_blocks_used = bm.n_blocks_used();
    st.kv_blocks_free = bm.n_blocks_free();
    st.kv_blocks_cached = bm.n_blocks_cached();
    st.prefix_lookup_tokens = bm.stats().n_lookup_tokens;
    st.prefix_hit_tokens = bm.stats().n_hit_tokens;
  }
  st.kv_blocks_peak = kv_blocks_peak_;
  st.kv_blocks_evicted = kv_->n_blocks_evicted();
  st.state_slots_total = kv_->n_state_slots();
  st.state_slots_used = kv_->n_state_slots_used();
  st.state_slots_peak = states_peak_;
  st.state_slot_bytes = static_cast<int64_t>(kv_->state_slot_bytes());
  st.state_bytes_total = static_cast<int64_t>(kv_->state_bytes());
  st.prefix_hit_rate =
      st.prefix_lookup_tokens > 0 ? static_cast<double>(st.prefix_hit_tokens) / st.prefix_lookup_tokens : 0.0;
  st.n_steps = n_steps_;
  st.n_tokens_stepped = n_tokens_stepped_;
  st.tokens_per_step = n_steps_ > 0 ? static_cast<double>(n_tokens_stepped_) / n_steps_ : 0.0;
  st.n_requests_finished = n_finished_;
  st.n_tokens_prompt = n_tokens_prompt_;
  st.n_tokens_generated = n_tokens_generated_;
  st.block_size = kv_->block_size();
  st.kv_block_bytes = static_cast<int64_t>(kv_->block_bytes());
  st.kv_slots_allocated_sum = slots_sum_;
  st.kv_positions_used_sum = used_sum_;
  st.n_running_sum = running_sum_;
  st.n_running_peak = running_peak_;
  st.decode_steps = decode_steps_;
  st.decode_tokens = decode_tokens_;
  st.decode_time_s = decode_time_s_;
  st.spec_proposed = spec_proposed_;
  st.spec_accepted = spec_accepted_;
  const auto experts = model_->expert_tokens();  // read between steps: stats() runs on the engine's thread
  st.moe_expert_tokens.assign(experts.begin(), experts.end());
  st.spec_verifies = spec_verifies_;
  st.spec_branch_accepted = spec_branch_accepted_;
  st.spec_draft_time_s = spec_ ? spec_->draft_time_s() : 0.0;
  return st;
}

std::string EngineCore::dump() const { return scheduler_->dump() + kv_->dump(); }

}  // namespace tern
