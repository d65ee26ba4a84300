#include "engine/bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/kv_format.h"
#include "core/memory_info.h"
#include "core/mmap.h"
#include "model/batch_runner.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

SampleStats sample_stats(const std::vector<double>& v) {
  SampleStats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    for (double x : v) s.std += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  }
  return s;
}

namespace {

std::vector<TokenId> random_tokens(int n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TokenId> t(n);
  for (auto& x : t) x = static_cast<TokenId>(rng() % static_cast<uint64_t>(n_vocab));
  return t;
}

// Times one pass over `tokens` as a prompt of sequence 0 starting at position
// pos0 (the positions before it already cached).
Result<double> time_prompt(BatchRunner& kv, const std::vector<TokenId>& tokens, int n_batch, int32_t pos0 = 0) {
  kv.truncate(SeqId(0), pos0);
  std::vector<float> logits;
  Batch b;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < tokens.size(); i += n_batch) {
    b.clear();
    const size_t end = std::min(tokens.size(), i + n_batch);
    for (size_t j = i; j < end; ++j)
      b.add(tokens[j], pos0 + static_cast<int32_t>(j), SeqId(0), j + 1 == tokens.size());
    TERN_RETURN_IF_ERROR(kv.forward(b, logits));
  }
  return seconds_since(t0);
}

// Times `steps` decode steps of `n_seq` sequences (one token each per step),
// after a one-token prompt per sequence at position pos0 (the positions
// before it already cached).
Result<double> time_decode(BatchRunner& kv, int n_seq, int steps, const std::vector<TokenId>& tokens,
                           int32_t pos0 = 0) {
  std::vector<float> logits;
  Batch b;
  for (int s = 0; s < n_seq; ++s) kv.truncate(SeqId(s), pos0);
  for (int s = 0; s < n_seq; ++s) b.add(tokens[s % tokens.size()], pos0, SeqId(s), true);
  TERN_RETURN_IF_ERROR(kv.forward(b, logits));
  const auto t0 = Clock::now();
  for (int step = 1; step <= steps; ++step) {
    b.clear();
    for (int s = 0; s < n_seq; ++s) b.add(tokens[(step * n_seq + s) % tokens.size()], pos0 + step, SeqId(s), true);
    TERN_RETURN_IF_ERROR(kv.forward(b, logits));
  }
  return seconds_since(t0);
}

}  // namespace

double model_flops_per_token(const Model& model, double mean_context) {
  const HParams& hp = model.hparams();
  // The FFN a token runs: the dense one, or its k experts plus the router and shared expert (MoE).
  const double ffn = hp.is_moe() ? 3.0 * hp.n_embd * (static_cast<double>(hp.n_ff_exp) * hp.n_expert_used + hp.n_ff_shexp) +
                                       static_cast<double>(hp.n_embd) * hp.n_expert
                                 : 3.0 * hp.n_embd * hp.n_ff;
  double matrix_params = static_cast<double>(hp.n_embd) * hp.n_vocab, other = 0.0;
  for (const LayerHParams& lh : hp.layers) {
    if (lh.recurrent) {  // Mamba: the mixer's four matrices, the conv and the scan (~6 flops per state value)
      const SsmHParams& s = hp.ssm;
      const double di = s.d_inner;
      // Mamba-2: in and out projections only; its conv also runs over B and C.
      matrix_params += s.mamba2() ? (static_cast<double>(s.in_rows()) + di) * hp.n_embd
                                  : 3.0 * di * hp.n_embd + di * (s.dt_rank + 2.0 * s.d_state) + s.dt_rank * di;
      other += 2.0 * s.d_conv * static_cast<double>(s.conv_channels()) + 6.0 * di * s.d_state;
    } else if (!lh.has_kv()) {  // a hybrid's FFN-only layer: up and down
      matrix_params += 2.0 * hp.n_embd * lh.n_ff;
    } else {  // attention (and, outside hybrid stacks, the layer's FFN)
      const double kv_dim = static_cast<double>(lh.n_head_kv) * hp.head_dim;
      matrix_params += 2.0 * hp.n_embd * hp.q_dim() + 2.0 * hp.n_embd * kv_dim + (hp.has_ssm() ? 0.0 : ffn);
      other += 4.0 * mean_context * hp.q_dim();
    }
  }
  return 2.0 * matrix_params + other;
}

double kv_read_bytes_per_token(const Model& model, double context, KvType type) {
  const HParams& hp = model.hparams();
  double bytes = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.layers[static_cast<size_t>(il)].recurrent) {  // the state, whatever the context
      bytes += static_cast<double>(hp.ssm.state_floats()) * sizeof(float);
      continue;
    }
    if (!hp.layers[static_cast<size_t>(il)].has_kv()) continue;  // a hybrid's FFN-only layer
    const int window = hp.layers[static_cast<size_t>(il)].sliding_window;
    const double positions = window > 0 ? std::min(context, static_cast<double>(window)) : context;
    bytes += 2.0 * static_cast<double>(kv_row_bytes(type, hp.layers[static_cast<size_t>(il)].n_head_kv, hp.head_dim)) *
             positions;
  }
  return bytes;
}

Result<BenchResult> run_bench(const Model& model, const BenchOptions& o,
                              const std::function<void(const std::string&)>& progress) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.repetitions < 1 || o.n_batch < 1)
    return error(ErrorKind::InvalidArgument, "bench: token counts must be >= 0 and repetitions >= 1");
  const HParams& hp = model.hparams();
  std::vector<int> depths = o.depths.empty() ? std::vector<int>{0} : o.depths;
  int max_depth = 0;
  for (int d : depths) {
    if (d < 0) return error(ErrorKind::InvalidArgument, "bench: depths must be >= 0");
    max_depth = std::max(max_depth, d);
  }
  const int n_ctx = max_depth + std::max(o.n_prompt, o.n_gen + 1) + 1;
  if (n_ctx > hp.n_ctx_train * 4)
    return error(ErrorKind::InvalidArgument, "bench: " + std::to_string(n_ctx) + " tokens is far beyond the model's context");
  int max_batch = 1;
  for (int b : o.batches) {
    if (b < 1 || b > 4096) return error(ErrorKind::InvalidArgument, "bench: batch sizes must be in [1, 4096]");
    max_batch = std::max(max_batch, b);
  }
  const auto tokens =
      random_tokens(std::max({max_depth, o.n_prompt, o.n_gen + 1, max_batch * 2, 16}), hp.n_vocab, o.seed);
  auto runner = BatchRunner::create(model, 1, n_ctx, o.kv_type);
  TERN_RETURN_IF_ERROR(runner.status());
  BatchRunner& kv = *runner.value();
  BenchResult r;
  r.flops_per_token_pp = model_flops_per_token(model, o.n_prompt / 2.0);

  for (int depth : depths) {
    DepthThroughput d;
    d.depth = depth;
    const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
    // The cached prefix is written once per depth, untimed; every repetition
    // then forgets what it added past it.
    if (depth > 0) {
      if (progress) progress("prompt of depth " + std::to_string(depth));
      const std::vector<TokenId> prefix(tokens.begin(), tokens.begin() + depth);
      auto s = time_prompt(kv, prefix, o.n_batch);
      if (!s) return s.status();
      kv.checkpoint(SeqId(0));  // recurrent layers: the state repetitions go back to
    }
    if (o.n_prompt > 0) {
      if (progress) progress("pp" + std::to_string(o.n_prompt) + at);
      const std::vector<TokenId> prompt(tokens.begin(), tokens.begin() + o.n_prompt);
      std::vector<double> rates;
      for (int rep = 0; rep <= o.repetitions; ++rep) {  // rep 0 is the warm-up
        auto s = time_prompt(kv, prompt, o.n_batch, depth);
        if (!s) return s.status();
        if (rep > 0) rates.push_back(o.n_prompt / *s);
      }
      const SampleStats st = sample_stats(rates);
      d.pp = {o.n_prompt, st.mean, st.std};
    }
    if (o.n_gen > 0) {
      if (progress) progress("tg" + std::to_string(o.n_gen) + at);
      std::vector<double> rates;
      for (int rep = 0; rep <= o.repetitions; ++rep) {
        auto s = time_decode(kv, 1, o.n_gen, tokens, depth);
        if (!s) return s.status();
        if (rep > 0) rates.push_back(o.n_gen / *s);
      }
      const SampleStats st = sample_stats(rates);
      d.tg = {o.n_gen, st.mean, st.std};
      // Timed steps run at positions depth+1 .. depth+n_gen, attending to
      // depth+2 .. depth+n_gen+1 positions: the mean is their midpoint.
      d.tg_kv_bytes = kv_read_bytes_per_token(model, depth + (o.n_gen + 3) / 2.0, o.kv_type);
    }
    r.depths.push_back(d);
  }
  r.pp = r.depths.front().pp;
  r.tg = r.depths.front().tg;
  // Steady-state memory: weights touched by pp/tg, the KV cache and buffers.
  r.rss_bytes = resident_bytes();
  r.kv_bytes = BatchRunner::kv_bytes(model, 1, n_ctx, o.kv_type);
  for (int b : o.batches) {
    if (progress) progress("batched b=" + std::to_string(b));
    const int steps = std::max(1, std::min(o.n_gen > 0 ? o.n_gen : 32, 32));
    auto bkv = BatchRunner::create(model, b, steps + 2);
    TERN_RETURN_IF_ERROR(bkv.status());
    std::vector<double> rates;
    for (int rep = 0; rep <= o.repetitions; ++rep) {
      auto s = time_decode(*bkv.value(), b, steps, tokens);
      if (!s) return s.status();
      if (rep > 0) rates.push_back(static_cast<double>(b) * steps / *s);
    }
    const SampleStats st = sample_stats(rates);
    r.batched.push_back({b, steps, st.mean, st.std});
  }
  return r;
}

Result<uint64_t> hash_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.status();
  auto bytes = f->bytes();
  // Four independent multiply-xorshift lanes over 8-byte words: ~GB/s, not cryptographic.
  uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
  const size_t n_words = bytes.size() / 8;
  const uint8_t* p = bytes.data();
  for (size_t i = 0; i < n_words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    uint64_t& x = h[i & 3];
    x = (x ^ w) * 0xff51afd7ed558ccdull;
    x ^= x >> 32;
  }
  uint64_t out = bytes.size();
  for (size_t i = n_words * 8; i < bytes.size(); ++i) out = (out ^ p[i]) * 0x100000001b3ull;
  for (uint64_t x : h) out = (out ^ x) * 0xc4ceb9fe1a85ec53ull, out ^= out >> 29;
  return out;
}

}  // namespace tern
