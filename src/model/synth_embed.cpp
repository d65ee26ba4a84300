#include "model/synth_embed.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gguf/reader.h"
#include "model/gguf_names.h"
#include "model/hparams.h"
#include "model/synth.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf::Value;
using gguf_names::Key;
using gguf_names::key;
using gguf_names::Tensor;
using gguf_names::tensor_name;

using Floats = std::shared_ptr<const std::vector<float>>;

// A small-model tensor decoded to F32 (row-major, rows of dims[0]).
Result<Floats> read_f32(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return error(ErrorKind::InvalidFile, "embed: the small model has no tensor " + name);
  const quant::TypeTraits* tr = quant::traits(t->type);
  if (!tr || !tr->to_float) return error(ErrorKind::Unsupported, "embed: cannot decode " + name + "'s type");
  auto out = std::make_shared<std::vector<float>>(t->n_elements);
  tr->to_float(t->data, out->data(), static_cast<int64_t>(t->n_elements));
  return Floats(std::move(out));
}

struct Shapes {
  int d, hs, nh, nkv, ff, L;  // small
  int D, Hs, H, KV, F, Lb;    // big
  int r() const { return Hs / hs; }
  // Big row of small Q/K row `row` (head h of n_heads, dim j): rotary pair
  // i = j / 2 goes to pair i * r, in big head `big_head(h)`.
  int big_q_head(int h) const { return (h / (nh / nkv)) * (H / KV) + h % (nh / nkv); }
  int big_dim(int j) const { return (j / 2) * 2 * r() + j % 2; }
};

Status check_shapes(const HParams& s, const Shapes& x) {
  auto bad = [](const std::string& m) { return error(ErrorKind::InvalidArgument, "synth --embed: " + m); };
  if (s.arch != "llama") return bad("the small model must be a llama (it is " + s.arch + ")");
  if (s.rope.n_rot != s.head_dim || s.rope.layout != kernels::RopeLayout::Normal || s.rope.freq_scale != 1.0f ||
      s.rope.yarn_orig_ctx > 0 || s.sliding_window != 0)
    return bad("the small model must use plain full RoPE and full attention");
  if (x.D < x.d || x.Lb < x.L || x.F < x.ff) return bad("--dim, --layers and --ffn must be at least the small model's (" +
                                                        std::to_string(x.d) + ", " + std::to_string(x.L) + ", " +
                                                        std::to_string(x.ff) + ")");
  if (x.H <= 0 || x.D % x.H != 0) return bad("--heads must divide --dim");
  if (x.KV <= 0 || x.H % x.KV != 0) return bad("--kv-heads must divide --heads");
  if (x.KV < x.nkv || x.H / x.KV < x.nh / x.nkv)
    return bad("the big shape needs at least " + std::to_string(x.nkv) + " kv-heads and " +
               std::to_string(x.nh / x.nkv) + " heads per kv-head");
  if (x.Hs % x.hs != 0) return bad("the head size " + std::to_string(x.Hs) + " must be a multiple of the small one's (" +
                                   std::to_string(x.hs) + ")");
  return Status::ok();
}

// Row sources. `src_row[R]` is the small row big row R copies (-1: zero).
RowSource padded_rows(Floats w, int64_t small_cols, int64_t big_cols, std::vector<int> src_row, float scale = 1.0f) {
  return [w, small_cols, big_cols, src_row = std::move(src_row), scale](int64_t R, float* row) {
    std::fill(row, row + big_cols, 0.0f);
    const int s = R < static_cast<int64_t>(src_row.size()) ? src_row[static_cast<size_t>(R)] : -1;
    if (s < 0) return;
    const float* from = w->data() + static_cast<int64_t>(s) * small_cols;
    for (int64_t c = 0; c < small_cols; ++c) row[c] = from[c] * scale;
  };
}

// Big row R < n copies small row R, zero beyond.
std::vector<int> first_rows(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

RowSource norm_source(Floats w, int d, int D) {
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d) / D));
  return [w, d, D, scale](int64_t, float* row) {
    std::fill(row, row + D, 0.0f);
    for (int i = 0; i < d; ++i) row[i] = (*w)[static_cast<size_t>(i)] * scale;
  };
}

RowSource constant(int64_t n, float v) {
  return [n, v](int64_t, float* row) { std::fill(row, row + n, v); };
}

}  // namespace

Result<QuantizeReport> synth_embed_model(const EmbedOptions& o, ThreadPool& pool, const QuantizeProgressFn& progress) {
  auto file = gguf::GgufFile::open(o.small_path);
  if (!file) return file.status();
  const gguf::TensorInfo* embd_info = file->find_tensor(tensor_name(Tensor::TokenEmbd));
  if (!embd_info) return error(ErrorKind::InvalidFile, o.small_path + ": no token_embd.weight");
  auto hp = read_hparams(*file, static_cast<int>(embd_info->dims[1]));
  if (!hp) return hp.status().with_context(o.small_path);
  const HParams& s = *hp;
  Shapes x{s.n_embd, s.head_dim, s.n_head, s.n_head_kv, s.n_ff, s.n_layer,
           o.n_embd, o.n_head > 0 ? o.n_embd / o.n_head : 0, o.n_head, o.n_head_kv ? o.n_head_kv : o.n_head, o.n_ff,
           o.n_layer};
  TERN_RETURN_IF_ERROR(check_shapes(s, x));
  for (int il = 0; il < s.n_layer; ++il)
    if (s.layers[static_cast<size_t>(il)].n_head_kv != s.n_head_kv)
      return error(ErrorKind::InvalidArgument, "synth --embed: the small model's layers must share one kv-head count");
  const std::string arch = "llama";
  const uint64_t n_vocab = embd_info->dims[1];

  gguf::GgufStreamWriter w;
  std::string small_name = "small";
  if (const Value* v = file->find("general.name"))
    if (const std::string* n = v->as_string()) small_name = *n;
  w.set(std::string(gguf_names::kArchitecture), Value::of_string(arch));
  w.set("general.name", Value::of_string(o.name.empty() ? "embed-" + small_name + "-" + std::to_string(x.D) + "x" +
                                                              std::to_string(x.Lb)
                                                        : o.name));
  w.set("general.file_type", Value::of_u32(o.scheme.file_type));
  w.set("general.quantization_version", Value::of_u32(2));
  w.set(key(arch, Key::ContextLength), Value::of_u32(static_cast<uint32_t>(s.n_ctx_train)));
  w.set(key(arch, Key::EmbeddingLength), Value::of_u32(static_cast<uint32_t>(x.D)));
  w.set(key(arch, Key::BlockCount), Value::of_u32(static_cast<uint32_t>(x.Lb)));
  w.set(key(arch, Key::FeedForwardLength), Value::of_u32(static_cast<uint32_t>(x.F)));
  w.set(key(arch, Key::HeadCount), Value::of_u32(static_cast<uint32_t>(x.H)));
  w.set(key(arch, Key::HeadCountKv), Value::of_u32(static_cast<uint32_t>(x.KV)));
  // The mean over D dims is d/D times the mean over d: eps scales with it.
  w.set(key(arch, Key::RmsEpsilon), Value::of_f32(static_cast<float>(static_cast<double>(s.rms_eps) * x.d / x.D)));
  w.set(key(arch, Key::RopeDimensionCount), Value::of_u32(static_cast<uint32_t>(x.Hs)));
  w.set(key(arch, Key::RopeFreqBase), Value::of_f32(s.rope.freq_base));
  w.set(key(arch, Key::VocabSize), Value::of_u32(static_cast<uint32_t>(n_vocab)));
  for (const auto& [k, value] : file->metadata())
    if (k.rfind("tokenizer.", 0) == 0) w.set(k, value);

  QuantModelInfo model;
  model.arch = arch;
  model.n_layer = x.Lb;
  model.n_head = x.H;
  model.n_head_kv = x.KV;
  model.has_output = true;

  // Big Q/K/V rows from small ones, and attn_output's columns.
  std::vector<int> q_src(static_cast<size_t>(x.H * x.Hs), -1), k_src(static_cast<size_t>(x.KV * x.Hs), -1),
      v_src(k_src), o_col(q_src);
  for (int h = 0; h < x.nh; ++h)
    for (int j = 0; j < x.hs; ++j) {
      q_src[static_cast<size_t>(x.big_q_head(h) * x.Hs + x.big_dim(j))] = h * x.hs + j;
      o_col[static_cast<size_t>(x.big_q_head(h) * x.Hs + j)] = h * x.hs + j;  // V dims are not rotated: kept in place
    }
  for (int g = 0; g < x.nkv; ++g)
    for (int j = 0; j < x.hs; ++j) {
      k_src[static_cast<size_t>(g * x.Hs + x.big_dim(j))] = g * x.hs + j;
      v_src[static_cast<size_t>(g * x.Hs + j)] = g * x.hs + j;
    }
  const uint64_t D = static_cast<uint64_t>(x.D), F = static_cast<uint64_t>(x.F);
  const uint64_t q_dim = static_cast<uint64_t>(x.H * x.Hs), kv_dim = static_cast<uint64_t>(x.KV * x.Hs);
  const float q_scale = static_cast<float>(std::sqrt(static_cast<double>(x.r())));

  std::vector<TensorJob> jobs;
  auto add = [&](Tensor t, int il, std::vector<uint64_t> dims, RowSource src) {
    jobs.push_back(generated_tensor_job(o.scheme, model, tensor_name(t, il), std::move(dims), std::move(src)));
  };
  auto small = [&](Tensor t, int il) { return read_f32(*file, tensor_name(t, il)); };
  auto embd = small(Tensor::TokenEmbd, -1);
  if (!embd) return embd.status();
  add(Tensor::TokenEmbd, -1, {D, n_vocab}, padded_rows(*embd, x.d, x.D, first_rows(static_cast<int>(n_vocab))));
  for (int il = 0; il < x.Lb; ++il) {
    if (il >= x.L) {  // a layer that costs a layer and adds nothing
      auto zeros = [](uint64_t n) { return constant(static_cast<int64_t>(n), 0.0f); };
      add(Tensor::AttnNorm, il, {D}, constant(x.D, 1.0f));
      add(Tensor::AttnQ, il, {D, q_dim}, zeros(D));
      add(Tensor::AttnK, il, {D, kv_dim}, zeros(D));
      add(Tensor::AttnV, il, {D, kv_dim}, zeros(D));
      add(Tensor::AttnOutput, il, {q_dim, D}, zeros(q_dim));
      add(Tensor::FfnNorm, il, {D}, constant(x.D, 1.0f));
      add(Tensor::FfnGate, il, {D, F}, zeros(D));
      add(Tensor::FfnUp, il, {D, F}, zeros(D));
      add(Tensor::FfnDown, il, {F, D}, zeros(F));
      continue;
    }
    Floats t[9];
    const Tensor names[9] = {Tensor::AttnNorm, Tensor::AttnQ,   Tensor::AttnK,  Tensor::AttnV,  Tensor::AttnOutput,
                             Tensor::FfnNorm,  Tensor::FfnGate, Tensor::FfnUp, Tensor::FfnDown};
    for (int i = 0; i < 9; ++i) {
      auto r = small(names[i], il);
      if (!r) return r.status();
      t[i] = *r;
    }
    add(Tensor::AttnNorm, il, {D}, norm_source(t[0], x.d, x.D));
    add(Tensor::AttnQ, il, {D, q_dim}, padded_rows(t[1], x.d, x.D, q_src, q_scale));
    add(Tensor::AttnK, il, {D, kv_dim}, padded_rows(t[2], x.d, x.D, k_src));
    add(Tensor::AttnV, il, {D, kv_dim}, padded_rows(t[3], x.d, x.D, v_src));
    // attn_output: row i < d gathers small row i's columns through o_col.
    add(Tensor::AttnOutput, il, {q_dim, D},
        [wo = t[4], o_col, d = x.d, small_cols = x.nh * x.hs, q_dim](int64_t R, float* row) {
          std::fill(row, row + q_dim, 0.0f);
          if (R >= d) return;
          for (size_t c = 0; c < o_col.size(); ++c)
            if (o_col[c] >= 0) row[c] = (*wo)[static_cast<size_t>(R * small_cols + o_col[c])];
        });
    add(Tensor::FfnNorm, il, {D}, norm_source(t[5], x.d, x.D));
    add(Tensor::FfnGate, il, {D, F}, padded_rows(t[6], x.d, x.D, first_rows(x.ff)));
    add(Tensor::FfnUp, il, {D, F}, padded_rows(t[7], x.d, x.D, first_rows(x.ff)));
    add(Tensor::FfnDown, il, {F, D}, padded_rows(t[8], x.ff, x.F, first_rows(x.d)));
  }
  auto out_norm = small(Tensor::OutputNorm, -1);
  if (!out_norm) return out_norm.status();
  add(Tensor::OutputNorm, -1, {D}, norm_source(*out_norm, x.d, x.D));
  Floats out_w = *embd;  // tied embeddings: the output is the embedding table
  if (file->find_tensor(tensor_name(Tensor::Output))) {
    auto r = small(Tensor::Output, -1);
    if (!r) return r.status();
    out_w = *r;
  }
  add(Tensor::Output, -1, {D, n_vocab}, padded_rows(out_w, x.d, x.D, first_rows(static_cast<int>(n_vocab))));

  auto report = write_tensor_jobs(w, o.out_path, jobs, pool, progress);
  if (!report) return report.status().with_context(o.out_path);
  return report;
}

}  // namespace tern
