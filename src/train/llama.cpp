#include "train/llama.h"

#include <algorithm>
#include <cmath>

#include "model/arch.h"
#include "model/hparams.h"
#include "quant/quant.h"
#include "train/ops.h"

namespace tern::train {

LlamaLayout LlamaLayout::make(const LlamaShape& s) {
  LlamaLayout l;
  l.shape = s;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims, bool decay) {
    ParamTensor t;
    t.name = name;
    t.size = 1;
    for (uint64_t d : dims) t.size *= d;
    t.dims = std::move(dims);
    t.offset = l.n_params;
    t.decay = decay;
    l.n_params += t.size;
    l.tensors.push_back(t);
    return t.offset;
  };
  const uint64_t C = static_cast<uint64_t>(s.n_embd), V = static_cast<uint64_t>(s.n_vocab),
                 Q = static_cast<uint64_t>(s.q_dim()), KV = static_cast<uint64_t>(s.kv_dim()),
                 FF = static_cast<uint64_t>(s.n_ff);
  l.tok_embd = add("token_embd.weight", {C, V}, true);
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Layer y;
    y.attn_norm = add(p + "attn_norm.weight", {C}, false);
    y.wq = add(p + "attn_q.weight", {C, Q}, true);
    y.wk = add(p + "attn_k.weight", {C, KV}, true);
    y.wv = add(p + "attn_v.weight", {C, KV}, true);
    y.wo = add(p + "attn_output.weight", {Q, C}, true);
    y.ffn_norm = add(p + "ffn_norm.weight", {C}, false);
    y.w_gate = add(p + "ffn_gate.weight", {C, FF}, true);
    y.w_up = add(p + "ffn_up.weight", {C, FF}, true);
    y.w_down = add(p + "ffn_down.weight", {FF, C}, true);
    l.layers.push_back(y);
  }
  l.output_norm = add("output_norm.weight", {C}, false);
  l.output = s.tied ? l.tok_embd : add("output.weight", {C, V}, true);
  return l;
}

Result<LlamaShape> llama_shape(const gguf::GgufFile& file) {
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd || embd->n_dims != 2) return error(ErrorKind::InvalidFile, "no 2-D token_embd.weight");
  auto hp = read_hparams(file, static_cast<int>(embd->dims[1]));
  if (!hp) return hp.status();
  auto refuse = [&](const std::string& what) {
    return error(ErrorKind::Unsupported, "training handles Llama-family blocks (llama, mistral) so far; this " +
                                             hp->arch + " model has " + what);
  };
  if (hp->arch != "llama" && hp->arch != "mistral") return refuse("another block structure");
  if (hp->is_moe()) return refuse("experts");
  for (const LayerHParams& l : hp->layers)
    if (l.n_head_kv != hp->n_head_kv || l.sliding_window != 0 || l.recurrent) return refuse("layers that differ or a sliding window");
  const kernels::RopeParams& r = hp->rope;
  if (r.n_rot != hp->head_dim || r.freq_scale != 1.0f || r.yarn_orig_ctx > 0 || file.find_tensor("rope_freqs.weight"))
    return refuse("partial, scaled or per-frequency rotary embedding");
  if (hp->attn_scale != 0.0f || hp->attn_softcap != 0.0f || hp->final_softcap != 0.0f || hp->embd_scale != 1.0f)
    return refuse("scaled or capped scores");
  if (file.find_tensor("blk.0.attn_q.bias") || file.find_tensor("blk.0.attn_q_norm.weight"))
    return refuse("Q/K/V biases or Q/K norms");
  LlamaShape s;
  s.n_vocab = hp->n_vocab;
  s.n_embd = hp->n_embd;
  s.n_layer = hp->n_layer;
  s.n_head = hp->n_head;
  s.n_head_kv = hp->n_head_kv;
  s.head_dim = hp->head_dim;
  s.n_ff = hp->n_ff;
  s.rms_eps = hp->rms_eps;
  s.rope_base = r.freq_base;
  s.rope_neox = r.layout == kernels::RopeLayout::NeoX;
  s.tied = file.find_tensor("output.weight") == nullptr;
  return s;
}

Result<std::vector<float>> load_params(const gguf::GgufFile& file, const LlamaLayout& layout) {
  std::vector<float> p(layout.n_params);
  for (const ParamTensor& t : layout.tensors) {
    const gguf::TensorInfo* info = file.find_tensor(t.name);
    if (!info) return error(ErrorKind::InvalidFile, "no tensor '" + t.name + "'");
    if (info->n_dims != t.dims.size() || !std::equal(t.dims.begin(), t.dims.end(), info->dims.begin()))
      return error(ErrorKind::InvalidFile, "tensor '" + t.name + "' has shape " + info->shape_string() +
                                               ", not the one the hyper-parameters give");
    const quant::TypeTraits* tr = quant::traits(info->type);
    if (!tr || !tr->to_float)
      return error(ErrorKind::Unsupported, "tensor '" + t.name + "' is " + std::string(gguf::type_name(info->type)) +
                                               ", which this build cannot decode");
    tr->to_float(info->data, p.data() + t.offset, static_cast<int64_t>(t.size));
  }
  return p;
}

template <typename F>
double LlamaPass<F>::forward(const F* P, const int32_t* tokens, const int32_t* targets, int64_t T, ThreadPool& pool) {
  const LlamaShape& s = layout_.shape;
  const int64_t C = s.n_embd, Q = s.q_dim(), KV = s.kv_dim(), FF = s.n_ff, V = s.n_vocab;
  const F eps = static_cast<F>(s.rms_eps), base = static_cast<F>(s.rope_base);
  const F scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  T_ = T;
  tokens_.assign(tokens, tokens + T);
  targets_.assign(targets, targets + T);
  acts_.resize(static_cast<size_t>(s.n_layer));
  std::vector<F> x(static_cast<size_t>(T * C)), tmp(static_cast<size_t>(T * C));
  embedding_forward(P + layout_.tok_embd, tokens, T, C, x.data());
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const LlamaLayout::Layer& w = layout_.layers[static_cast<size_t>(il)];
    LayerActs& a = acts_[static_cast<size_t>(il)];
    a.x_in = x;
    a.n1.resize(static_cast<size_t>(T * C));
    a.rstd1.resize(static_cast<size_t>(T));
    rmsnorm_forward(x.data(), P + w.attn_norm, T, C, eps, a.n1.data(), a.rstd1.data());
    a.q.resize(static_cast<size_t>(T * Q));
    a.k.resize(static_cast<size_t>(T * KV));
    a.v.resize(static_cast<size_t>(T * KV));
    linear_forward(a.n1.data(), P + w.wq, T, C, Q, a.q.data(), pool);
    linear_forward(a.n1.data(), P + w.wk, T, C, KV, a.k.data(), pool);
    linear_forward(a.n1.data(), P + w.wv, T, C, KV, a.v.data(), pool);
    rope_forward(a.q.data(), T, s.n_head, s.head_dim, base, s.rope_neox);
    rope_forward(a.k.data(), T, s.n_head_kv, s.head_dim, base, s.rope_neox);
    a.att.resize(static_cast<size_t>(T * Q));
    a.lse.resize(static_cast<size_t>(T * s.n_head));
    attention_forward(a.q.data(), a.k.data(), a.v.data(), T, s.n_head, s.n_head_kv, s.head_dim, scale, a.att.data(),
                      a.lse.data(), pool);
    linear_forward(a.att.data(), P + w.wo, T, Q, C, tmp.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
    a.x_mid = x;
    a.n2.resize(static_cast<size_t>(T * C));
    a.rstd2.resize(static_cast<size_t>(T));
    rmsnorm_forward(x.data(), P + w.ffn_norm, T, C, eps, a.n2.data(), a.rstd2.data());
    a.gate.resize(static_cast<size_t>(T * FF));
    a.up.resize(static_cast<size_t>(T * FF));
    a.h.resize(static_cast<size_t>(T * FF));
    linear_forward(a.n2.data(), P + w.w_gate, T, C, FF, a.gate.data(), pool);
    linear_forward(a.n2.data(), P + w.w_up, T, C, FF, a.up.data(), pool);
    swiglu_forward(a.gate.data(), a.up.data(), T * FF, a.h.data());
    linear_forward(a.h.data(), P + w.w_down, T, FF, C, tmp.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
  }
  x_out_ = x;
  nf_.resize(static_cast<size_t>(T * C));
  rstdf_.resize(static_cast<size_t>(T));
  rmsnorm_forward(x.data(), P + layout_.output_norm, T, C, eps, nf_.data(), rstdf_.data());
  logits_.resize(static_cast<size_t>(T * V));
  linear_forward(nf_.data(), P + layout_.output, T, C, V, logits_.data(), pool);
  ce_grad_.assign(static_cast<size_t>(T * V), F(0));
  return cross_entropy<F>(logits_.data(), targets, T, V, ce_grad_.data());
}

template <typename F>
void LlamaPass<F>::backward(const F* P, F* G, ThreadPool& pool, const F* dlogits) {
  const LlamaShape& s = layout_.shape;
  const int64_t T = T_, C = s.n_embd, Q = s.q_dim(), KV = s.kv_dim(), FF = s.n_ff, V = s.n_vocab;
  const F base = static_cast<F>(s.rope_base);
  const F scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  auto zeros = [](int64_t n) { return std::vector<F>(static_cast<size_t>(n), F(0)); };

  const F* dlog = dlogits ? dlogits : ce_grad_.data();
  std::vector<F> dnf = zeros(T * C), dx = zeros(T * C);
  linear_backward(dlog, nf_.data(), P + layout_.output, T, C, V, dnf.data(), G + layout_.output, pool);
  rmsnorm_backward(dnf.data(), x_out_.data(), P + layout_.output_norm, rstdf_.data(), T, C, dx.data(),
                   G + layout_.output_norm);
  for (int64_t il = s.n_layer - 1; il >= 0; --il) {
    const LlamaLayout::Layer& w = layout_.layers[static_cast<size_t>(il)];
    const LayerActs& a = acts_[static_cast<size_t>(il)];
    // x_out = x_mid + Wdown·h(n2(x_mid))
    std::vector<F> dh = zeros(T * FF), dgate = zeros(T * FF), dup = zeros(T * FF), dn2 = zeros(T * C);
    linear_backward(dx.data(), a.h.data(), P + w.w_down, T, FF, C, dh.data(), G + w.w_down, pool);
    swiglu_backward(dh.data(), a.gate.data(), a.up.data(), T * FF, dgate.data(), dup.data());
    linear_backward(dgate.data(), a.n2.data(), P + w.w_gate, T, C, FF, dn2.data(), G + w.w_gate, pool);
    linear_backward(dup.data(), a.n2.data(), P + w.w_up, T, C, FF, dn2.data(), G + w.w_up, pool);
    std::vector<F> dmid = dx;
    rmsnorm_backward(dn2.data(), a.x_mid.data(), P + w.ffn_norm, a.rstd2.data(), T, C, dmid.data(), G + w.ffn_norm);
    // x_mid = x_in + Wo·attn(rope(Wq·n1), rope(Wk·n1), Wv·n1)
    std::vector<F> datt = zeros(T * Q), dq = zeros(T * Q), dk = zeros(T * KV), dv = zeros(T * KV), dn1 = zeros(T * C);
    linear_backward(dmid.data(), a.att.data(), P + w.wo, T, Q, C, datt.data(), G + w.wo, pool);
    attention_backward(datt.data(), a.q.data(), a.k.data(), a.v.data(), a.att.data(), a.lse.data(), T, s.n_head,
                       s.n_head_kv, s.head_dim, scale, dq.data(), dk.data(), dv.data(), pool);
    rope_backward(dq.data(), T, s.n_head, s.head_dim, base, s.rope_neox);
    rope_backward(dk.data(), T, s.n_head_kv, s.head_dim, base, s.rope_neox);
    linear_backward(dq.data(), a.n1.data(), P + w.wq, T, C, Q, dn1.data(), G + w.wq, pool);
    linear_backward(dk.data(), a.n1.data(), P + w.wk, T, C, KV, dn1.data(), G + w.wk, pool);
    linear_backward(dv.data(), a.n1.data(), P + w.wv, T, C, KV, dn1.data(), G + w.wv, pool);
    dx = dmid;
    rmsnorm_backward(dn1.data(), a.x_in.data(), P + w.attn_norm, a.rstd1.data(), T, C, dx.data(), G + w.attn_norm);
  }
  embedding_backward(dx.data(), tokens_.data(), T, C, G + layout_.tok_embd);
}

template class LlamaPass<float>;
template class LlamaPass<double>;

}  // namespace tern::train
