// Weight binding: GGUF tensor names → views, with shape and type checks and
// a report of the tensors nothing bound, then the backend's load step.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <unordered_set>

#include "core/assert.h"
#include "model/arch.h"
#include "model/gguf_names.h"
#include "model/hf_model.h"
#include "model/model.h"
#include "quant/quant.h"

namespace tern {
namespace {

using gguf_names::Tensor;
using gguf_names::tensor_name;

// Tensors a file may carry that change nothing tern computes, so loading
// accepts them unused; an entry needs its reason here and a test. Empty: every
// tensor llama.cpp's converters write changes the model when present —
// rope_freqs.weight on an architecture that does not read it, attention-output
// and FFN biases, MoE router and expert weights.
constexpr std::array<std::string_view, 0> kHarmlessUnused{};

std::string dims_text(int64_t cols, int64_t rows) {
  return "[" + std::to_string(cols) + ", " + std::to_string(rows) + "]";
}

// Binds tensors by their table names (model/gguf_names.h) with shape and type
// checks, and remembers every name it bound so that the rest can be reported.
class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}

  bool has(Tensor t, int il = -1) const { return f_.find_tensor(tensor_name(t, il)) != nullptr; }
  bool has_name(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // A matrix of n_rows rows of n_cols, used in place from the mapping.
  Status matrix(Tensor t, int il, int64_t n_cols, int64_t n_rows, kernels::WeightView& out) {
    return matrix_rows(t, il, n_cols, n_rows, 0, n_rows, out);
  }

  // Rows [row_begin, row_begin + n_rows) of a matrix of n_rows_total rows of
  // n_cols: one part of a fused tensor (Q, K, V of attn_qkv; gate, up of a
  // fused ffn_up), a view of its own so that the backend prepares (packs) each
  // part as the matrix it multiplies by. Rows never share a block.
  Status matrix_rows(Tensor t, int il, int64_t n_cols, int64_t n_rows_total, int64_t row_begin, int64_t n_rows,
                     kernels::WeightView& out) {
    TERN_ASSERT(row_begin >= 0 && row_begin + n_rows <= n_rows_total);
    const std::string name = tensor_name(t, il);
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    if (info->n_dims > 2 || static_cast<int64_t>(info->dims[0]) != n_cols ||
        static_cast<int64_t>(info->dims[1]) != n_rows_total)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected " +
                                               dims_text(n_cols, n_rows_total));
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr)
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has type " + std::string(gguf::type_name(info->type)) +
                                               ", which this build cannot compute with yet");
    out = kernels::WeightView{};
    out.traits = tr;
    out.row_stride_bytes = quant::row_bytes(*tr, n_cols);
    out.data = static_cast<const uint8_t*>(info->data) + static_cast<size_t>(row_begin) * out.row_stride_bytes;
    out.n_rows = n_rows;
    out.n_cols = n_cols;
    out.file_backed = f_.file_backed() && !info->in_memory;
    if (quant::has_row_scale(info->type)) {
      auto scale = row_scales(name, n_rows_total, info->type);
      if (!scale) return scale.status();
      out.row_scale = *scale + row_begin;
    }
    used_.insert(name);
    return Status::ok();
  }

  // W8A8 and FP8 (docs/quantize.md): an I8 or F8 matrix "<base>.weight" has its
  // per-row f32 scales in "<base>.scale"; without them its codes mean nothing.
  // Expert tensors [n_cols, n_rows, n_expert] have theirs as F32 [n_rows, n_expert].
  Result<const float*> row_scales(const std::string& name, int64_t n_rows, gguf::GgmlType type, int64_t n_expert = 0) {
    const std::string scale_name = gguf_names::row_scale_name(name);
    const gguf::TensorInfo* s = f_.find_tensor(scale_name);
    if (!s)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' is " +
                                               (type == gguf::GgmlType::I8 ? std::string("I8 (W8A8)")
                                                                           : std::string(gguf::type_name(type))) +
                                               " but its row scales '" + scale_name + "' are missing");
    const bool shape_ok = n_expert > 0 ? s->n_dims == 2 && static_cast<int64_t>(s->dims[1]) == n_expert : s->n_dims == 1;
    if (s->type != gguf::GgmlType::F32 || !shape_ok || static_cast<int64_t>(s->dims[0]) != n_rows)
      return error(ErrorKind::InvalidFile, "tensor '" + scale_name + "' must be F32 of shape [" + std::to_string(n_rows) +
                                               (n_expert > 0 ? ", " + std::to_string(n_expert) : std::string()) +
                                               "] (one scale per row of '" + name + "')");
    if (reinterpret_cast<uintptr_t>(s->data) % alignof(float) != 0)
      return error(ErrorKind::InvalidFile, "tensor '" + scale_name + "' is not aligned to 4 bytes");
    used_.insert(scale_name);
    return static_cast<const float*>(static_cast<const void*>(s->data));
  }

  // Expert e of a 3-D tensor [n_cols, n_rows, n_expert], for every e: the
  // experts' matrices are consecutive slabs of n_rows rows, each a view of its
  // own so that the backend prepares (packs) each expert as the matrix it
  // multiplies by. `pick` selects the view inside out[e].
  Status experts(Tensor t, int il, int64_t n_cols, int64_t n_rows, int64_t n_expert, std::vector<FfnWeights>& out,
                 kernels::WeightView FfnWeights::*pick) {
    const std::string name = tensor_name(t, il);
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    if (info->n_dims != 3 || static_cast<int64_t>(info->dims[0]) != n_cols ||
        static_cast<int64_t>(info->dims[1]) != n_rows || static_cast<int64_t>(info->dims[2]) != n_expert)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected [" +
                                               std::to_string(n_cols) + ", " + std::to_string(n_rows) + ", " +
                                               std::to_string(n_expert) + "] (row length, rows, experts)");
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr)
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has type " + std::string(gguf::type_name(info->type)) +
                                               ", which this build cannot compute with yet");
    const float* scales = nullptr;  // FP8 or I8 experts: [n_rows, n_expert] row scales
    if (quant::has_row_scale(info->type)) {
      auto s = row_scales(name, n_rows, info->type, n_expert);
      if (!s) return s.status();
      scales = *s;
    }
    out.resize(static_cast<size_t>(n_expert));
    const size_t row_bytes = quant::row_bytes(*tr, n_cols);
    for (int64_t e = 0; e < n_expert; ++e) {
      kernels::WeightView& v = out[static_cast<size_t>(e)].*pick;
      v = kernels::WeightView{};
      v.traits = tr;
      v.row_stride_bytes = row_bytes;
      v.data = static_cast<const uint8_t*>(info->data) + static_cast<size_t>(e * n_rows) * row_bytes;
      v.n_rows = n_rows;
      v.n_cols = n_cols;
      v.file_backed = f_.file_backed();
      if (scales) v.row_scale = scales + e * n_rows;
    }
    used_.insert(name);
    return Status::ok();
  }

  // A 1-D tensor of n values used as a matrix of one row (qwen2moe's
  // shared-expert gate, a dot product per token).
  Status row_vector(Tensor t, int il, int64_t n, kernels::WeightView& out) {
    const std::string name = tensor_name(t, il);
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    if (info->n_elements != static_cast<uint64_t>(n) || info->dims[0] != static_cast<uint64_t>(n))
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected [" +
                                               std::to_string(n) + "]");
    return matrix_rows(t, il, n, 1, 0, 1, out);
  }

  // A 1-D tensor (norm weight, bias) decoded to f32; absent and optional leaves out.host empty.
  Status vector(Tensor t, int il, int64_t n, bool required, VectorWeight& out) {
    const std::string name = tensor_name(t, il);
    out.host.clear();
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) {
      if (required) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
      return Status::ok();
    }
    if (info->n_elements != static_cast<uint64_t>(n) || info->dims[0] != static_cast<uint64_t>(n))
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected [" +
                                               std::to_string(n) + "]");
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr || quant::has_row_scale(info->type))  // codes without their scale are not values
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has unsupported type " +
                                               std::string(gguf::type_name(info->type)));
    out.host.resize(static_cast<size_t>(n));
    tr->to_float(info->data, out.host.data(), n);
    used_.insert(name);
    return Status::ok();
  }

  // A 2-D tensor of ne1 rows of ne0 values decoded to f32 (convolution taps,
  // the state-space A): out.host is [ne1][ne0] as the file stores it.
  Status table(Tensor t, int il, int64_t ne0, int64_t ne1, VectorWeight& out) {
    const std::string name = tensor_name(t, il);
    const gguf::TensorInfo* info = f_.find_tensor(name);
    if (!info) return error(ErrorKind::InvalidFile, "tensor '" + name + "' is missing");
    if (info->n_dims != 2 || static_cast<int64_t>(info->dims[0]) != ne0 || static_cast<int64_t>(info->dims[1]) != ne1)
      return error(ErrorKind::InvalidFile, "tensor '" + name + "' has shape " + info->shape_string() + ", expected " +
                                               dims_text(ne0, ne1));
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr || quant::has_row_scale(info->type) || ne0 % tr->block_elems != 0)
      return error(ErrorKind::Unsupported, "tensor '" + name + "' has unsupported type " +
                                               std::string(gguf::type_name(info->type)));
    out.host.resize(static_cast<size_t>(ne0 * ne1));
    const size_t row = quant::row_bytes(*tr, ne0);
    for (int64_t r = 0; r < ne1; ++r)
      tr->to_float(static_cast<const uint8_t*>(info->data) + static_cast<size_t>(r) * row,
                   out.host.data() + r * ne0, ne0);
    used_.insert(name);
    return Status::ok();
  }

  // Unsupported, listing the file's tensors that nothing bound: computing
  // without them would silently give other results than the model's.
  Status check_all_used(std::string_view arch) const {
    std::vector<std::string_view> unused;
    for (const gguf::TensorInfo& t : f_.tensors())
      if (!used_.contains(t.name) && std::ranges::find(kHarmlessUnused, t.name) == kHarmlessUnused.end())
        unused.push_back(t.name);
    if (unused.empty()) return Status::ok();
    constexpr size_t kMaxListed = 8;
    std::string list;
    for (size_t i = 0; i < std::min(unused.size(), kMaxListed); ++i) {
      list += (i ? ", " : "") + std::string(unused[i]);
      if (const std::string_view what = gguf_names::describe_tensor(unused[i]); !what.empty())
        list += " (" + std::string(what) + ")";
    }
    if (unused.size() > kMaxListed) list += ", and " + std::to_string(unused.size() - kMaxListed) + " more";
    return error(ErrorKind::Unsupported, "the file has " + std::to_string(unused.size()) + " tensor" +
                                             (unused.size() == 1 ? "" : "s") + " that architecture '" +
                                             std::string(arch) + "' does not use, so tern would compute a " +
                                             "different model than the file describes: " + list);
  }

 private:
  const gguf::GgufFile& f_;
  std::unordered_set<std::string> used_;
};

// Q, K, V (one fused tensor or three), output projection, optional biases and q/k norms of layer il.
Status bind_attention(Binder& bind, const HParams& hp, const ArchInfo& arch, int il, AttentionWeights& a) {
  const int64_t n_embd = hp.n_embd, q_dim = hp.q_dim(), kv_dim = hp.kv_dim(il);
  if (arch.fused_qkv && bind.has(Tensor::AttnQkv, il)) {
    const int64_t n_rows = q_dim + 2 * kv_dim;  // [q; k; v]
    TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::AttnQkv, il, n_embd, n_rows, 0, q_dim, a.wq));
    TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::AttnQkv, il, n_embd, n_rows, q_dim, kv_dim, a.wk));
    TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::AttnQkv, il, n_embd, n_rows, q_dim + kv_dim, kv_dim, a.wv));
  } else {
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnQ, il, n_embd, q_dim, a.wq));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnK, il, n_embd, kv_dim, a.wk));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnV, il, n_embd, kv_dim, a.wv));
  }
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::AttnOutput, il, q_dim, n_embd, a.wo));
  if (arch.reads_qkv_bias) {
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnQBias, il, q_dim, false, a.bq));
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnKBias, il, kv_dim, false, a.bk));
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnVBias, il, kv_dim, false, a.bv));
  }
  if (arch.reads_qk_norm) {
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnQNorm, il, hp.head_dim, true, a.q_norm));
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnKNorm, il, hp.head_dim, true, a.k_norm));
  }
  return Status::ok();
}

// Gate, up (one fused [gate; up] tensor or two) and down of layer il.
Status bind_ffn(Binder& bind, const HParams& hp, const ArchInfo& arch, int il, FfnWeights& w) {
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff;
  if (arch.fused_gate_up) {
    TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::FfnUp, il, n_embd, 2 * n_ff, 0, n_ff, w.w_gate));
    TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::FfnUp, il, n_embd, 2 * n_ff, n_ff, n_ff, w.w_up));
  } else {
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnGate, il, n_embd, n_ff, w.w_gate));
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnUp, il, n_embd, n_ff, w.w_up));
  }
  return bind.matrix(Tensor::FfnDown, il, n_ff, n_embd, w.w_down);
}

// The router, the experts (3-D tensors) and, where the arch has one, the
// shared expert and its gate, of layer il.
Status bind_moe(Binder& bind, const HParams& hp, const ArchInfo& arch, int il, MoeWeights& w) {
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff_exp, n_expert = hp.n_expert;
  // Files converted before llama.cpp merged the experts (early 2024) hold one
  // 2-D tensor per expert; tern reads only the merged 3-D layout.
  const std::string legacy = "blk." + std::to_string(il) + ".ffn_gate.0.weight";
  if (bind.has_name(legacy))
    return error(ErrorKind::Unsupported, "tensor '" + legacy + "': this file stores each expert as its own 2-D tensor " +
                                             "(blk.N.ffn_{gate,up,down}.E.weight, the pre-2024 Mixtral GGUF layout), " +
                                             "which tern does not read; re-convert the model with a current " +
                                             "llama.cpp convert_hf_to_gguf.py (3-D ffn_*_exps tensors)");
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnGateInp, il, n_embd, n_expert, w.router));
  TERN_RETURN_IF_ERROR(bind.experts(Tensor::FfnGateExps, il, n_embd, n_ff, n_expert, w.experts, &FfnWeights::w_gate));
  TERN_RETURN_IF_ERROR(bind.experts(Tensor::FfnUpExps, il, n_embd, n_ff, n_expert, w.experts, &FfnWeights::w_up));
  TERN_RETURN_IF_ERROR(bind.experts(Tensor::FfnDownExps, il, n_ff, n_embd, n_expert, w.experts, &FfnWeights::w_down));
  if (!arch.moe->shared_expert) return Status::ok();
  const int64_t n_sh = hp.n_ff_shexp;
  TERN_RETURN_IF_ERROR(bind.row_vector(Tensor::FfnGateInpShexp, il, n_embd, w.shared_gate));
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnGateShexp, il, n_embd, n_sh, w.shared.w_gate));
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnUpShexp, il, n_embd, n_sh, w.shared.w_up));
  return bind.matrix(Tensor::FfnDownShexp, il, n_sh, n_embd, w.shared.w_down);
}

// Mamba-2's mixer of layer il: the projections, the convolution over x, B
// and C, and per head dt bias, A and D (each a [1, n_head] table).
Status bind_ssm2(Binder& bind, const HParams& hp, int il, SsmWeights& w) {
  const SsmHParams& s = hp.ssm;
  const int64_t n_head = s.n_head(), group = s.d_inner / s.n_group;
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::SsmIn, il, hp.n_embd, s.in_rows(), w.in));
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::SsmDtBias, il, n_head, true, w.dt_bias));
  TERN_RETURN_IF_ERROR(bind.table(Tensor::SsmA, il, 1, n_head, w.a));
  TERN_RETURN_IF_ERROR(bind.table(Tensor::SsmD, il, 1, n_head, w.d));
  TERN_RETURN_IF_ERROR(bind.table(Tensor::SsmNorm, il, group, s.n_group, w.norm));
  if (s.n_group > 1) w.ones.host.assign(static_cast<size_t>(group), 1.0f);
  return bind.matrix(Tensor::SsmOut, il, s.d_inner, hp.n_embd, w.out);
}

// The Mamba mixer of layer il (shapes: model/layers.h, SsmWeights).
Status bind_ssm(Binder& bind, const HParams& hp, int il, SsmWeights& w) {
  const SsmHParams& s = hp.ssm;
  const int64_t n_embd = hp.n_embd, d_inner = s.d_inner, d_conv = s.d_conv, n_xdb = s.dt_rank + 2 * int64_t{s.d_state};
  const int64_t n_ch = s.conv_channels();
  VectorWeight taps;  // [n_ch][d_conv]; the conv reads tap k of 16 channels at once
  TERN_RETURN_IF_ERROR(bind.table(Tensor::SsmConv1d, il, d_conv, n_ch, taps));
  w.conv.host.resize(taps.host.size());
  for (int64_t c = 0; c < n_ch; ++c)
    for (int64_t k = 0; k < d_conv; ++k)
      w.conv.host[static_cast<size_t>(k * n_ch + c)] = taps.host[static_cast<size_t>(c * d_conv + k)];
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::SsmConv1dBias, il, n_ch, true, w.conv_bias));
  if (s.mamba2()) return bind_ssm2(bind, hp, il, w);
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::SsmIn, il, n_embd, 2 * d_inner, w.in));
  TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::SsmX, il, d_inner, n_xdb, 0, s.dt_rank, w.x_dt));
  TERN_RETURN_IF_ERROR(bind.matrix_rows(Tensor::SsmX, il, d_inner, n_xdb, s.dt_rank, 2 * int64_t{s.d_state}, w.x_bc));
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::SsmDt, il, s.dt_rank, d_inner, w.dt));
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::SsmDtBias, il, d_inner, true, w.dt_bias));
  VectorWeight a;  // [d_inner][d_state]; the scan reads state s of 16 channels at once
  TERN_RETURN_IF_ERROR(bind.table(Tensor::SsmA, il, s.d_state, d_inner, a));
  w.a.host.resize(a.host.size());
  for (int64_t c = 0; c < d_inner; ++c)
    for (int64_t k = 0; k < s.d_state; ++k)
      w.a.host[static_cast<size_t>(k * d_inner + c)] = a.host[static_cast<size_t>(c * s.d_state + k)];
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::SsmD, il, d_inner, true, w.d));
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::SsmOut, il, d_inner, n_embd, w.out));
  if (s.dt_b_c_rms) w.ones.host.assign(static_cast<size_t>(std::max(s.dt_rank, s.d_state)), 1.0f);
  return Status::ok();
}

// Optional RoPE frequency divisors ([n_rot/2]): every one must be a positive
// finite number (a zero would make every angle, then every logit, non-finite).
Status bind_rope_factors(Binder& bind, Tensor t, const HParams& hp, VectorWeight& out) {
  TERN_RETURN_IF_ERROR(bind.vector(t, -1, hp.rope.n_rot / 2, false, out));
  for (size_t i = 0; i < out.host.size(); ++i)
    if (!(out.host[i] > 0.0f) || !std::isfinite(out.host[i]))
      return error(ErrorKind::InvalidFile, "tensor '" + tensor_name(t) + "' value " + std::to_string(i) + " is " +
                                               std::to_string(out.host[i]) + ": RoPE factors must be positive and finite");
  return Status::ok();
}

}  // namespace

Status Model::bind_weights() {
  Binder bind(file_);
  const int64_t n_embd = hp_.n_embd, n_vocab = hp_.n_vocab;
  TERN_RETURN_IF_ERROR(bind.matrix(Tensor::TokenEmbd, -1, n_embd, n_vocab, tok_embd_));
  TERN_RETURN_IF_ERROR(bind.vector(Tensor::OutputNorm, -1, n_embd, true, output_norm_));
  if (bind.has(Tensor::Output)) {
    TERN_RETURN_IF_ERROR(bind.matrix(Tensor::Output, -1, n_embd, n_vocab, output_));
  } else {
    output_ = tok_embd_;  // tied embeddings
  }
  if (arch_->reads_rope_freqs) TERN_RETURN_IF_ERROR(bind_rope_factors(bind, Tensor::RopeFreqs, hp_, rope_freqs_));
  if (arch_->reads_long_rope) {
    TERN_RETURN_IF_ERROR(bind_rope_factors(bind, Tensor::RopeFactorsLong, hp_, rope_long_));
    TERN_RETURN_IF_ERROR(bind_rope_factors(bind, Tensor::RopeFactorsShort, hp_, rope_short_));
    if (rope_long_.host.empty() != rope_short_.host.empty())
      return error(ErrorKind::InvalidFile, "the file has only one of " + tensor_name(Tensor::RopeFactorsLong) + " and " +
                                               tensor_name(Tensor::RopeFactorsShort) +
                                               ": LongRoPE needs both (the context chooses between them)");
  }
  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnNorm, il, n_embd, true, l.attn_norm));
    const LayerHParams& lh = hp_.layers[static_cast<size_t>(il)];
    if (lh.recurrent) {
      TERN_RETURN_IF_ERROR(bind_ssm(bind, hp_, il, l.ssm));
      continue;
    }
    if (arch_->hybrid) {  // one sub-layer, normed by attn_norm: attention, or an ungated FFN
      if (lh.has_kv()) {
        TERN_RETURN_IF_ERROR(bind_attention(bind, hp_, *arch_, il, l.attn));
      } else {
        TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnUp, il, n_embd, lh.n_ff, l.ffn.w_up));
        TERN_RETURN_IF_ERROR(bind.matrix(Tensor::FfnDown, il, lh.n_ff, n_embd, l.ffn.w_down));
      }
      continue;
    }
    TERN_RETURN_IF_ERROR(bind_attention(bind, hp_, *arch_, il, l.attn));
    TERN_RETURN_IF_ERROR(bind.vector(Tensor::FfnNorm, il, n_embd, true, l.ffn_norm));
    if (hp_.is_moe())
      TERN_RETURN_IF_ERROR(bind_moe(bind, hp_, *arch_, il, l.moe));
    else
      TERN_RETURN_IF_ERROR(bind_ffn(bind, hp_, *arch_, il, l.ffn));
    if (arch_->reads_post_norms) {
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::AttnPostNorm, il, n_embd, true, l.attn_post_norm));
      TERN_RETURN_IF_ERROR(bind.vector(Tensor::FfnPostNorm, il, n_embd, true, l.ffn_post_norm));
    }
  }
  TERN_RETURN_IF_ERROR(bind.check_all_used(hp_.arch));
  auto bytes = [](const kernels::WeightView& w) { return static_cast<uint64_t>(w.row_stride_bytes) * w.n_rows; };
  auto ffn_bytes = [&](const FfnWeights& f) { return bytes(f.w_gate) + bytes(f.w_up) + bytes(f.w_down); };
  weight_bytes_ = bytes(output_);
  active_weight_bytes_ = weight_bytes_;
  for (const auto& l : layers_) {
    const uint64_t common = bytes(l.attn.wq) + bytes(l.attn.wk) + bytes(l.attn.wv) + bytes(l.attn.wo) +
                            ffn_bytes(l.ffn) + bytes(l.moe.router) + ffn_bytes(l.moe.shared) + bytes(l.moe.shared_gate) +
                            bytes(l.ssm.in) + bytes(l.ssm.x_dt) + bytes(l.ssm.x_bc) + bytes(l.ssm.dt) + bytes(l.ssm.out);
    uint64_t experts = 0;
    for (const FfnWeights& e : l.moe.experts) experts += ffn_bytes(e);
    weight_bytes_ += common + experts;
    // A token reads k of the n_expert experts (all the same size).
    active_weight_bytes_ += common + (hp_.is_moe() ? experts / static_cast<uint64_t>(hp_.n_expert) *
                                                         static_cast<uint64_t>(hp_.n_expert_used)
                                                   : 0);
  }
  if (hp_.is_moe()) expert_tokens_.assign(static_cast<size_t>(hp_.n_expert), 0);
  return Status::ok();
}

// The backend's load step for every matrix the forward pass multiplies by
// (a tied output is also the embedding table, read by row: left as it is),
// and the vectors it reads.
void Model::prepare_weights() {
  backend::Backend& be = *backend_;
  auto up = [&](VectorWeight& v) { v.dev = v.host.empty() ? nullptr : be.upload(v.host); };
  for (LayerWeights& l : layers_) {
    for (kernels::WeightView* w : {&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.ffn.w_gate, &l.ffn.w_up, &l.ffn.w_down,
                                   &l.moe.router, &l.moe.shared_gate, &l.moe.shared.w_gate, &l.moe.shared.w_up,
                                   &l.moe.shared.w_down, &l.ssm.in, &l.ssm.x_dt, &l.ssm.x_bc, &l.ssm.dt, &l.ssm.out})
      if (w->data) be.prepare_matrix(*w);
    for (FfnWeights& e : l.moe.experts)
      for (kernels::WeightView* w : {&e.w_gate, &e.w_up, &e.w_down}) be.prepare_matrix(*w);
    for (VectorWeight* v : {&l.attn_norm, &l.ffn_norm, &l.attn.bq, &l.attn.bk, &l.attn.bv, &l.attn.q_norm, &l.attn.k_norm,
                            &l.attn_post_norm, &l.ffn_post_norm, &l.ssm.conv, &l.ssm.conv_bias, &l.ssm.dt_bias,
                            &l.ssm.a, &l.ssm.d, &l.ssm.ones, &l.ssm.norm})
      up(*v);
  }
  if (output_.data != tok_embd_.data) be.prepare_matrix(output_);
  for (VectorWeight* v : {&output_norm_, &rope_freqs_, &rope_long_, &rope_short_}) up(*v);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, std::shared_ptr<backend::Backend> backend,
                                           const MapOptions& options) {
  // A Hugging Face checkpoint directory is opened as the GGUF it converts to (model/hf_model.h).
  auto file = hf::open_model_file(path, options);
  if (!file) return file.status();
  auto model = from_gguf(std::move(file).value(), std::move(backend));
  if (!model) return model.status().with_context(path);
  return model;
}

Result<std::unique_ptr<Model>> Model::from_gguf(gguf::GgufFile file, std::shared_ptr<backend::Backend> backend) {
  auto model = std::unique_ptr<Model>(new Model());
  model->backend_ = backend ? std::move(backend) : std::shared_ptr<backend::Backend>(
                                                       backend::make_backend(backend::BackendKind::Cpu, 0));
  model->file_ = std::move(file);
  const std::string embd_name = tensor_name(Tensor::TokenEmbd);
  const gguf::TensorInfo* embd = model->file_.find_tensor(embd_name);
  if (!embd) return error(ErrorKind::InvalidFile, "tensor '" + embd_name + "' is missing (is this a model file?)");
  auto hp = read_hparams(model->file_, static_cast<int>(embd->dims[1]));
  if (!hp) return hp.status();
  model->hp_ = std::move(hp).value();
  model->arch_ = find_arch(model->hp_.arch);  // read_hparams refused unknown ones
  TERN_ASSERT(model->arch_);
  TERN_RETURN_IF_ERROR(model->bind_weights());
  model->assign_kv_groups();
  model->prepare_weights();
  return model;
}

namespace {

// The parts of each tensor's bytes outside every packed source, in order:
// what forward() reads in place.
template <typename F>
void for_each_in_place(const gguf::GgufFile& file, std::vector<std::span<const uint8_t>> packed, F&& f) {
  std::sort(packed.begin(), packed.end(), [](auto a, auto b) { return a.data() < b.data(); });
  for (const gguf::TensorInfo& t : file.tensors()) {
    const uint8_t* p = t.data;
    const uint8_t* end = t.data + t.n_bytes;
    auto it = std::lower_bound(packed.begin(), packed.end(), p,
                               [](std::span<const uint8_t> s, const uint8_t* q) { return s.data() + s.size() <= q; });
    for (; it != packed.end() && it->data() < end && p < end; ++it) {
      if (it->data() > p) f(std::span<const uint8_t>(p, it->data()));
      p = std::max(p, it->data() + it->size());
    }
    if (p < end) f(std::span<const uint8_t>(p, end));
  }
}

}  // namespace

Result<uint64_t> Model::lock_memory() const {
  uint64_t locked = 0;
  for (std::span<const uint8_t> b : backend_->packed_buffers()) {
    TERN_RETURN_IF_ERROR(lock_in_memory(b, "packed weights"));
    locked += b.size();
  }
  Status st;
  for_each_in_place(file_, backend_->packed_sources(), [&](std::span<const uint8_t> b) {
    if (!st) return;
    st = lock_in_memory(b, "weights");
    locked += b.size();
  });
  TERN_RETURN_IF_ERROR(st);
  return locked;
}

std::vector<const float*> Model::block_input_norms() const {
  std::vector<const float*> out;
  for (const LayerWeights& l : layers_) out.push_back(l.attn_norm.dev ? l.attn_norm.dev : l.ffn_norm.dev);
  return out;
}

uint64_t Model::in_place_bytes() const {
  uint64_t n = 0;
  for_each_in_place(file_, backend_->packed_sources(), [&](std::span<const uint8_t> b) { n += b.size(); });
  return n;
}

}  // namespace tern
