#include "engine/engine_core.h"

#include <algorithm>
#include <thread>

#include "core/assert.h"
#include "core/format_bytes.h"
#include "core/log.h"
#include "core/memory_info.h"
#include "engine/kv_budget.h"

namespace tern {

// Everything the engine keeps per request besides the scheduler's view.
struct EngineCore::Sequence {
  RequestId id;
  SeqId seq;
  GenerationRequest req;
  std::vector<TokenId> tokens;  // [n_prompt + n_generated]
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int32_t n_cached = -1;        // prefix-cache hit at first admission; -1 before it
  Sampler sampler;
  StreamDecoder decoder;
  StopMatcher stops;
  OutputCallback on_output;
  double t_arrival = 0, t_first = -1, t_last = 0, itl_sum = 0;
  int64_t n_itl = 0;

  Sequence(RequestId id_, SeqId seq_, PreparedRequest p, OutputCallback cb, const Tokenizer& tok, int n_vocab,
           double now)
      : id(id_),
        seq(seq_),
        req(std::move(p.request)),
        tokens(std::move(p.prompt)),
        n_prompt(static_cast<int32_t>(tokens.size())),
        sampler(req.sampling, n_vocab),
        decoder(tok, std::all_of(tokens.begin(), tokens.end(), [&](TokenId t) { return tok.is_control(t); })),
        stops(req.stop),
        on_output(std::move(cb)),
        t_arrival(now) {
    for (TokenId t : tokens) sampler.accept(t);  // penalties see the prompt, as in `tern run`
  }
};

// The scheduler's window onto the paged KV cache.
class EngineCore::Allocator final : public KvAllocator {
 public:
  explicit Allocator(EngineCore& core) : core_(core) {}

  int n_blocks_total() const override { return core_.kv_->blocks().n_blocks_total(); }
  int n_blocks_free() const override { return core_.kv_->blocks().n_blocks_free(); }
  int n_blocks_needed(const SchedRequest& r, int32_t n_tokens_total) const override {
    const Sequence& s = seq(r);
    if (swapped_.count(r.seq.value)) {  // swap_in restores into fresh blocks, no prefix hit
      const int bs = core_.kv_->block_size();
      return (n_tokens_total + bs - 1) / bs;
    }
    const bool fresh = core_.kv_->blocks().block_table(s.seq).empty();
    return core_.kv_->blocks().n_blocks_needed(s.seq, n_tokens_total, s.tokens, fresh ? n_tokens_cached(r) : 0);
  }
  int32_t n_tokens_cached(const SchedRequest& r) const override {
    if (!core_.config_.prefix_caching) return 0;
    return core_.kv_->blocks().find_cached_prefix(seq(r).tokens);
  }
  bool allocate_slots(const SchedRequest& r, int32_t n_tokens_total) override {
    Sequence& s = seq(r);
    BlockManager& bm = core_.kv_->blocks();
    const bool fresh = bm.block_table(s.seq).empty();
    const int32_t n_cached = fresh ? r.n_computed : 0;
    if (!bm.allocate(s.seq, n_tokens_total, s.tokens, n_cached)) return false;
    if (fresh) {
      core_.kv_->set_n_positions(s.seq, n_cached);
      if (s.n_cached < 0) s.n_cached = n_cached;
    }
    return true;
  }
  void free_slots(const SchedRequest& r) override {
    core_.kv_->truncate(r.seq, 0);
    swapped_.erase(r.seq.value);
  }
  bool swap_out(const SchedRequest& r) override {
    auto swapped = core_.kv_->swap_out(r.seq, core_.swap_compression_);
    if (!swapped.is_ok()) {
      TERN_LOG_WARN("engine: swap_out: %s (recomputing instead)", swapped.status().message().c_str());
      return false;
    }
    swapped_[r.seq.value] = std::move(swapped).value();
    return true;
  }
  bool swap_in(const SchedRequest& r) override {
    auto it = swapped_.find(r.seq.value);
    TERN_ASSERT(it != swapped_.end());
    if (!core_.kv_->swap_in(r.seq, it->second).is_ok()) return false;
    swapped_.erase(it);
    return true;
  }

 private:
  Sequence& seq(const SchedRequest& r) const {
    auto it = core_.seqs_.find(r.id.value);
    TERN_ASSERT(it != core_.seqs_.end());
    return *it->second;
  }
  EngineCore& core_;
  std::unordered_map<int32_t, SwappedKv> swapped_;  // by sequence id
};

namespace {

// An explicit context (-c) must fit at least one sequence in the pool: else
// every long request would be cut at the pool's edge with no hint why. (The
// model's own context, the default, is capped to the pool silently.)
Status check_context_fits_pool(const EngineConfig& config, const KvShape& shape, int n_blocks) {
  if (config.n_ctx <= 0) return Status::ok();
  const int64_t n_needed = (static_cast<int64_t>(config.n_ctx) + config.block_size - 1) / config.block_size;
  if (n_needed <= n_blocks) return Status::ok();
  const uint64_t block_bytes = paged_kv_block_bytes(shape, config.block_size);
  return error(ErrorKind::InvalidArgument,
               "a context of " + std::to_string(config.n_ctx) + " tokens needs " + std::to_string(n_needed) +
                   " KV blocks (" + format_bytes(n_needed * block_bytes) + ") but the pool holds " +
                   std::to_string(n_blocks) + " (" + format_bytes(n_blocks * block_bytes) +
                   "), not even one sequence; lower -c or raise --kv-memory");
}

}  // namespace

EngineCore::~EngineCore() = default;

Result<std::unique_ptr<EngineCore>> EngineCore::create(const EngineConfig& config) {
  std::unique_ptr<EngineCore> core(new EngineCore());
  core->config_ = config;
  auto policy = parse_schedule_policy(config.policy);
  TERN_RETURN_IF_ERROR(policy.status());
  auto preemption = parse_preemption_mode(config.preemption);
  TERN_RETURN_IF_ERROR(preemption.status());
  auto compression = parse_swap_compression(config.swap_compression);
  TERN_RETURN_IF_ERROR(compression.status());
  core->swap_compression_ = compression.value();
  if (config.block_size < 1 || config.block_size > 1024)
    return error(ErrorKind::InvalidArgument, "block size must be in [1, 1024]");
  if (config.max_num_seqs < 1) return error(ErrorKind::InvalidArgument, "max_num_seqs must be >= 1");
  if (config.max_batched_tokens < 1) return error(ErrorKind::InvalidArgument, "max_batched_tokens must be >= 1");

  auto backend_kind = backend::parse_backend_kind(config.backend);
  TERN_RETURN_IF_ERROR(backend_kind.status());
  auto model = Model::load(config.model_path, backend::make_backend(backend_kind.value(), config.n_threads));
  TERN_RETURN_IF_ERROR(model.status());
  core->model_ = std::move(model).value();
  auto tokenizer = Tokenizer::from_gguf(core->model_->file());
  TERN_RETURN_IF_ERROR(tokenizer.status());
  core->tokenizer_ = std::move(tokenizer).value();
  const HParams& hp = core->model_->hparams();
  core->n_ctx_ = config.n_ctx > 0 ? config.n_ctx : hp.n_ctx_train;
  warn_past_training_context(hp, core->n_ctx_);

  const std::vector<KvCacheSpec> specs = core->model_->kv_specs(config.kv_f16 ? KvType::F16 : KvType::F32);
  TERN_ASSERT_MSG(specs.size() == 1, "the engine keeps one KV group");
  const KvShape shape{specs[0].n_layer, specs[0].n_kv_head, specs[0].head_dim, specs[0].type};
  int64_t bytes = config.kv_memory_bytes;
  if (bytes > 0) {
    // The pool is only address space until used: without this check a busy
    // server would find out through the OOM killer.
    TERN_RETURN_IF_ERROR(check_kv_fits_memory(static_cast<uint64_t>(bytes), "a KV pool of --kv-memory",
                                              "lower --kv-memory or give a fraction of it such as 0.5"));
  } else {
    if (config.kv_memory_fraction <= 0 || config.kv_memory_fraction > 1)
      return error(ErrorKind::InvalidArgument, "KV memory fraction must be in (0, 1]");
    bytes = static_cast<int64_t>(config.kv_memory_fraction * static_cast<double>(available_memory_bytes()));
  }
  int n_blocks = paged_kv_blocks_for_bytes(shape, config.block_size, bytes);
  if (config.kv_memory_bytes <= 0) {
    // A fraction of RAM can far exceed what max_num_seqs full contexts could
    // ever fill (and each block costs bookkeeping): cap the default there.
    const int64_t per_seq = (static_cast<int64_t>(core->n_ctx_) + config.block_size - 1) / config.block_size;
    n_blocks = static_cast<int>(std::min<int64_t>(n_blocks, per_seq * std::max(1, config.max_num_seqs)));
  }
  if (n_blocks < 1)
    return error(ErrorKind::InvalidArgument, "KV memory of " + std::to_string(bytes) + " bytes is less than one block (" +
                                                 std::to_string(paged_kv_block_bytes(shape, config.block_size)) +
                                                 " bytes); raise --kv-memory");
  TERN_RETURN_IF_ERROR(check_context_fits_pool(config, shape, n_blocks));
  auto kv = PagedKvCache::create(shape, n_blocks, config.block_size, config.prefix_caching);
  TERN_RETURN_IF_ERROR(kv.status());
  core->kv_ = std::move(kv).value();
  core->max_seq_positions_ = std::min<int64_t>(core->n_ctx_, static_cast<int64_t>(n_blocks) * config.block_size);

  SchedulerConfig sc;
  sc.policy = policy.value();
  sc.preemption = preemption.value();
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_batched_tokens = config.max_batched_tokens;
  sc.watermark = config.watermark;
  sc.ageing_per_s = config.ageing_per_s;
  for (const auto& [tenant, w] : config.tenant_weights) {
    if (!(w > 0)) return error(ErrorKind::InvalidArgument, "tenant weight for '" + tenant + "' must be > 0");
    sc.tenant_weights[tenant] = w;
  }
  core->scheduler_ = std::make_unique<Scheduler>(sc);
  core->allocator_ = std::make_unique<Allocator>(*core);
  core->t0_ = std::chrono::steady_clock::now();
  return core;
}

double EngineCore::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

Result<PreparedRequest> EngineCore::prepare(GenerationRequest request) const {
  TERN_RETURN_IF_ERROR(request.sampling.validate());
  if (request.max_tokens < 0) return error(ErrorKind::InvalidArgument, "max_tokens must be >= 0");
  if (request.n_logprobs < -1 || request.n_logprobs > 20)
    return error(ErrorKind::InvalidArgument, "top logprobs must be between 0 and 20");
  const int n_vocab = model_->hparams().n_vocab;
  PreparedRequest p;
  if (!request.prompt_tokens.empty()) {
    for (TokenId t : request.prompt_tokens)
      if (t < 0 || t >= n_vocab)
        return error(ErrorKind::InvalidArgument, "prompt token id " + std::to_string(t) +
                                                     " is outside the vocabulary of " + std::to_string(n_vocab));
    p.prompt = request.prompt_tokens;
  } else {
    p.prompt = tokenizer_->encode(request.prompt, request.add_special, /*parse_special=*/true);
  }
  if (p.prompt.empty()) return error(ErrorKind::InvalidArgument, "the prompt has no tokens (nothing to condition on)");
  const int64_t n = static_cast<int64_t>(p.prompt.size());
  if (n >= n_ctx_)
    return error(ErrorKind::OutOfRange, "the prompt has " + std::to_string(n) + " tokens, " +
                                            std::to_string(n - n_ctx_ + 1) + " more than the context of " +
                                            std::to_string(n_ctx_) + " allows (one position is needed to generate)");
  const int bs = kv_->block_size();
  const int64_t blocks = (n + 1 + bs - 1) / bs;
  if (blocks > kv_->blocks().n_blocks_total())
    return error(ErrorKind::OutOfRange, "the prompt needs " + std::to_string(blocks) + " KV blocks but the pool holds " +
                                            std::to_string(kv_->blocks().n_blocks_total()) + " (raise --kv-memory)");
  std::erase_if(request.stop, [](const std::string& s) { return s.empty(); });
  p.request = std::move(request);
  return p;
}

void EngineCore::add(RequestId id, PreparedRequest prepared, OutputCallback on_output) {
  const double now = now_s();
  const SeqId seq(next_seq_);
  next_seq_ = next_seq_ == INT32_MAX ? 0 : next_seq_ + 1;
  auto s = std::make_unique<Sequence>(id, seq, std::move(prepared), std::move(on_output), *tokenizer_,
                                      model_->hparams().n_vocab, now);
  n_tokens_prompt_ += s->n_prompt;
  Sequence& ref = *s;
  seqs_.emplace(id.value, std::move(s));
  if (ref.req.max_tokens == 0) {  // nothing to generate: finish at once
    finish(ref, FinishReason::Length);
    return;
  }
  SchedRequest r;
  r.id = id;
  r.seq = seq;
  r.priority = ref.req.priority;
  r.tenant = ref.req.tenant;
  r.arrival_s = now;
  r.n_prompt = ref.n_prompt;
  r.n_tokens = ref.n_prompt;
  r.max_tokens = ref.req.max_tokens;
  scheduler_->add(std::move(r));
}

void EngineCore::cancel(RequestId id) { cancelled_.insert(id.value); }

void EngineCore::cancel_all() {
  for (const auto& [id, s] : seqs_) cancelled_.insert(id);
}

bool EngineCore::has_work() const { return !seqs_.empty() || !cancelled_.empty(); }

// Builds the final output (flushing held-back text), delivers it and forgets the request.
void EngineCore::finish(Sequence& s, FinishReason reason, const std::string& error_message, RequestOutput* last) {
  RequestOutput o = last ? std::move(*last) : RequestOutput{};
  o.id = s.id;
  o.finish = reason;
  o.error = error_message;
  // Deliver any text still held by the decoder or the stop matcher.
  if (reason != FinishReason::Stop && reason != FinishReason::Error) {
    auto tail = s.stops.push(s.decoder.flush());
    o.text += tail.emit;
    if (tail.stopped) o.finish = FinishReason::Stop;
    else o.text += s.stops.flush();
  }
  const double now = now_s();
  o.n_tokens_prompt = s.n_prompt;
  o.n_tokens_generated = s.n_generated;
  o.n_tokens_cached = std::max(0, s.n_cached);
  SchedRequest* r = scheduler_->find(s.id);  // absent when it never entered the scheduler
  if (r) o.n_preemptions = r->n_preemptions;
  o.ttft_ms = s.t_first >= 0 ? (s.t_first - s.t_arrival) * 1e3 : 0.0;
  o.itl_ms_mean = s.n_itl > 0 ? s.itl_sum / static_cast<double>(s.n_itl) * 1e3 : 0.0;
  o.e2e_ms = (now - s.t_arrival) * 1e3;
  if (r) scheduler_->remove(s.id, *allocator_);
  scheduler_->record_output_length(s.n_generated);
  ++n_finished_;
  OutputCallback cb = std::move(s.on_output);
  seqs_.erase(s.id.value);  // s is gone from here on
  if (cb) cb(o);
}

void EngineCore::sample_and_emit(Sequence& s, std::span<float> logits) {
  RequestOutput o;
  o.id = s.id;
  std::vector<float> raw;  // logits before penalties, for logprobs
  if (s.req.n_logprobs >= 0) raw.assign(logits.begin(), logits.end());
  const TokenId tok = s.sampler.sample(logits);
  s.sampler.accept(tok);
  s.tokens.push_back(tok);
  ++s.n_generated;
  ++n_tokens_generated_;
  const double now = now_s();
  if (s.t_first < 0) {
    s.t_first = now;
  } else {
    s.itl_sum += now - s.t_last;
    ++s.n_itl;
  }
  s.t_last = now;
  o.has_token = true;
  o.token = tok;
  if (s.req.n_logprobs >= 0) {
    o.logprob = Sampler::log_softmax_at(raw, tok);
    for (const auto& [id, lp] : Sampler::top_logprobs(raw, s.req.n_logprobs)) o.top_logprobs.push_back({id, lp});
  }
  std::optional<FinishReason> reason;
  if (!s.req.ignore_eos && tokenizer_->is_eog(tok)) {
    reason = FinishReason::Eos;
  } else {
    auto step = s.stops.push(s.decoder.push(tok));
    o.text = std::move(step.emit);
    if (step.stopped) reason = FinishReason::Stop;
  }
  if (!reason && s.n_generated >= s.req.max_tokens) reason = FinishReason::Length;
  // The context limit, or the whole KV pool: the next step must hold every token.
  if (!reason && static_cast<int64_t>(s.tokens.size()) >= max_seq_positions_) reason = FinishReason::Context;
  if (SchedRequest* r = scheduler_->find(s.id)) r->n_tokens = static_cast<int32_t>(s.tokens.size());
  if (!reason) {
    if (s.on_output) s.on_output(o);
    return;
  }
  finish(s, *reason, {}, &o);  // the last token and the final figures travel in one output
}

Status EngineCore::step() {
  if (!cancelled_.empty()) {
    std::vector<uint64_t> ids(cancelled_.begin(), cancelled_.end());
    cancelled_.clear();
    for (uint64_t id : ids)
      if (auto it = seqs_.find(id); it != seqs_.end()) finish(*it->second, FinishReason::Cancelled);
  }
  const double t_step = now_s();
  const SchedulerOutput out = scheduler_->schedule(*allocator_, t_step);
  if (out.chunks.empty()) return Status::ok();
  bool decode_only = true;

  input_.clear();
  input_.kv.resize(1);
  ForwardInput::KvGroup& kg = input_.kv[0];
  kg.table_begin.push_back(0);
  const int bs = kv_->block_size();
  std::vector<Sequence*> to_sample;  // in logits-row order
  std::vector<int32_t> chunk_begin(out.chunks.size());
  Status st;
  for (size_t i = 0; i < out.chunks.size() && st.is_ok(); ++i) {
    const ScheduledChunk& c = out.chunks[i];
    Sequence& s = *seqs_.at(c.id.value);
    const SchedRequest* r = scheduler_->find(c.id);
    const int32_t begin = r->n_computed, end = begin + c.n_tokens;
    TERN_ASSERT(kv_->n_positions(s.seq) == begin && end <= static_cast<int32_t>(s.tokens.size()));
    chunk_begin[i] = begin;
    // Blocks for the positions written (copy-on-write for shared ones).
    st = kv_->reserve(s.seq, end);
    const int32_t si = input_.n_seqs++;
    for (BlockId b : kv_->blocks().block_table(s.seq)) kg.table_data.push_back(b.value);
    kg.table_begin.push_back(static_cast<int32_t>(kg.table_data.size()));
    const std::span<const int32_t> table = kg.table(si);
    const bool last = end == static_cast<int32_t>(s.tokens.size());
    for (int32_t p = begin; p < end; ++p) {
      if (last && p + 1 == end) input_.logits_rows.push_back(static_cast<int32_t>(input_.tokens.size()));
      input_.tokens.push_back(s.tokens[static_cast<size_t>(p)]);
      input_.positions.push_back(p);
      input_.seq.push_back(si);
      if (st.is_ok()) kg.slots.push_back(static_cast<int64_t>(table[static_cast<size_t>(p / bs)]) * bs + p % bs);
    }
    if (last) to_sample.push_back(&s);
    decode_only = decode_only && c.n_tokens == 1 && begin >= s.n_prompt;
  }
  const KvPoolView pools[] = {kv_->view()};
  if (st.is_ok()) st = model_->forward(input_, pools, logits_);
  if (!st.is_ok()) {
    for (const ScheduledChunk& c : out.chunks)
      if (auto it = seqs_.find(c.id.value); it != seqs_.end()) finish(*it->second, FinishReason::Error, st.message());
    return st;
  }
  scheduler_->on_step(out);
  ++n_steps_;
  for (size_t i = 0; i < out.chunks.size(); ++i)
    kv_->set_n_positions(seqs_.at(out.chunks[i].id.value)->seq, chunk_begin[i] + out.chunks[i].n_tokens);
  n_tokens_stepped_ += static_cast<int64_t>(input_.n_tokens());
  kv_blocks_peak_ = std::max(kv_blocks_peak_, kv_->blocks().n_blocks_used());

  if (config_.prefix_caching) {
    const int bs = kv_->block_size();
    for (size_t i = 0; i < out.chunks.size(); ++i) {
      const int32_t begin = chunk_begin[i], end = begin + out.chunks[i].n_tokens;
      if (begin / bs == end / bs) continue;  // no block completed
      Sequence& s = *seqs_.at(out.chunks[i].id.value);
      kv_->cache_blocks(s.seq, s.tokens);
    }
  }
  // Memory-use figures over the sequences that ran (before any of them finishes).
  int64_t used = 0;
  for (const ScheduledChunk& c : out.chunks) used += kv_->n_positions(seqs_.at(c.id.value)->seq);
  slots_sum_ += static_cast<int64_t>(kv_->blocks().n_blocks_used()) * kv_->block_size();
  used_sum_ += used;
  running_sum_ += static_cast<int64_t>(out.chunks.size());
  running_peak_ = std::max(running_peak_, static_cast<int>(out.chunks.size()));

  const int n_vocab = model_->hparams().n_vocab;
  for (size_t i = 0; i < to_sample.size(); ++i)
    sample_and_emit(*to_sample[i], std::span<float>(logits_.data() + i * n_vocab, n_vocab));
  if (decode_only) {
    ++decode_steps_;
    decode_tokens_ += static_cast<int64_t>(out.chunks.size());
    decode_time_s_ += now_s() - t_step;
  }
  return Status::ok();
}

EngineStats EngineCore::stats() const {
  EngineStats st;
  const SchedulerStats ss = scheduler_->stats();
  st.n_waiting = ss.n_waiting;
  st.n_running = ss.n_running;
  st.n_swapped = ss.n_swapped;
  st.n_preemptions = ss.n_preemptions;
  const BlockManager& bm = kv_->blocks();
  st.kv_blocks_total = bm.n_blocks_total();
  st.kv_blocks_used = bm.n_blocks_used();
  st.kv_blocks_free = bm.n_blocks_free();
  st.kv_blocks_cached = bm.n_blocks_cached();
  st.kv_blocks_peak = kv_blocks_peak_;
  st.prefix_lookup_tokens = bm.stats().n_lookup_tokens;
  st.prefix_hit_tokens = bm.stats().n_hit_tokens;
  st.prefix_hit_rate =
      st.prefix_lookup_tokens > 0 ? static_cast<double>(st.prefix_hit_tokens) / st.prefix_lookup_tokens : 0.0;
  st.n_steps = n_steps_;
  st.n_tokens_stepped = n_tokens_stepped_;
  st.tokens_per_step = n_steps_ > 0 ? static_cast<double>(n_tokens_stepped_) / n_steps_ : 0.0;
  st.n_requests_finished = n_finished_;
  st.n_tokens_prompt = n_tokens_prompt_;
  st.n_tokens_generated = n_tokens_generated_;
  st.block_size = kv_->block_size();
  st.kv_block_bytes = static_cast<int64_t>(paged_kv_block_bytes(kv_->shape(), kv_->block_size()));
  st.kv_slots_allocated_sum = slots_sum_;
  st.kv_positions_used_sum = used_sum_;
  st.n_running_sum = running_sum_;
  st.n_running_peak = running_peak_;
  st.decode_steps = decode_steps_;
  st.decode_tokens = decode_tokens_;
  st.decode_time_s = decode_time_s_;
  return st;
}

std::string EngineCore::dump() const { return scheduler_->dump() + kv_->dump(); }

}  // namespace tern
