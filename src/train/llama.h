// train/llama.h — a Llama-family model for training: F32 (or, in the tests,
// double) parameters in one buffer, the forward pass over one sequence with
// every activation its backward needs saved, and the backward pass into a
// gradient buffer of the same layout (docs/train.md).
//
// The blocks are Llama's (as llama2.c and tern's llama_block compute them):
// x += Wo·attn(rope(Wq·n1), rope(Wk·n1), Wv·n1) with n1 = rmsnorm(x); then
// x += Wdown·(silu(Wgate·n2) ⊙ Wup·n2) with n2 = rmsnorm(x); logits =
// Wout·rmsnorm(x), Wout the token embedding when tied. Architectures whose
// blocks add more (biases, Q/K norms, experts, sliding windows, softcaps,
// rope scaling or partial rotation) are refused when loading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"

namespace tern::train {

struct LlamaShape {
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  double rms_eps = 1e-5;
  double rope_base = 10000.0;
  bool rope_neox = false;  // pairs (i, i + D/2) instead of (2i, 2i+1)
  bool tied = true;        // the output head is the token embedding
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Where each tensor lies in the parameter buffer, by GGUF name.
struct ParamTensor {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] is the row length
  size_t offset = 0;
  size_t size = 0;
  bool decay = true;  // matrices are weight-decayed; norms are not
};

struct LlamaLayout {
  LlamaShape shape;
  std::vector<ParamTensor> tensors;
  size_t n_params = 0;
  // Offsets of each layer's tensors, and of the global ones.
  struct Layer {
    size_t attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  std::vector<Layer> layers;
  size_t tok_embd = 0, output_norm = 0, output = 0;  // output == tok_embd when tied

  static LlamaLayout make(const LlamaShape& s);
};

// The shape of a GGUF model, when the training core can train it (what it
// refuses, and why, in the error).
Result<LlamaShape> llama_shape(const gguf::GgufFile& file);

// The parameters of `file` decoded to F32 in `layout`'s order.
Result<std::vector<float>> load_params(const gguf::GgufFile& file, const LlamaLayout& layout);

// One sequence's forward pass with what backward needs, and its backward.
// targets[t] is the token after tokens[t] (< 0: not scored).
template <typename F>
class LlamaPass {
 public:
  explicit LlamaPass(const LlamaLayout& layout) : layout_(layout) {}
  // Mean cross-entropy over the scored positions; logits() holds [T][n_vocab]
  // and ce_grad() its gradient d(cross-entropy)/d(logits), computed with it.
  double forward(const F* params, const int32_t* tokens, const int32_t* targets, int64_t T, ThreadPool& pool);
  // Adds d(loss)/d(params) into grads; dlogits (when given, [T][n_vocab])
  // replaces the cross-entropy gradient (distillation's own loss).
  void backward(const F* params, F* grads, ThreadPool& pool, const F* dlogits = nullptr);
  const std::vector<F>& logits() const { return logits_; }
  const std::vector<F>& ce_grad() const { return ce_grad_; }

 private:
  struct LayerActs {
    std::vector<F> x_in, n1, rstd1, q, k, v, att, lse, x_mid, n2, rstd2, gate, up, h;
  };
  const LlamaLayout& layout_;
  int64_t T_ = 0;
  std::vector<int32_t> tokens_, targets_;
  std::vector<LayerActs> acts_;
  std::vector<F> x_out_, nf_, rstdf_, logits_, ce_grad_;
};

}  // namespace tern::train
