// kernels/ref/ops.h — scalar reference operators.
//
// These are the oracle every optimised kernel is tested against, and the
// path used where no fast kernel exists yet. All activations are f32,
// row-major; weights are rows of any type with quant traits. Functions
// never allocate except matmul's per-thread row scratch.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "quant/quant.h"

namespace tern::kernels {

// A weight matrix viewed in place (usually inside the mmapped file).
// [n_rows][n_cols] in `type` blocks, row-major; row r starts at data + r * row_stride_bytes.
struct WeightView {
  const quant::TypeTraits* traits = nullptr;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_stride_bytes = 0;
  // The same matrix in its kernel's packed form (kernels/pack.h), or null.
  // Only an optimisation: results are identical either way.
  const void* packed = nullptr;
  // data maps a file: once packed, its pages may be dropped (they are read
  // back from the file if touched). False for weights in ordinary memory,
  // which dropping would zero.
  bool file_backed = false;
  // W8A8 (traits I8, kernels/w8a8.h): row r's weights are its int8 quants
  // times row_scale[r]; kernels compute with the quants, and matmul multiplies
  // each output by its row's scale. Null for every block type.
  const float* row_scale = nullptr;
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_stride_bytes; }
};

// y[t][r] = dot(w.row(r), x[t]) for t < n_tokens, r < w.n_rows.
// x: [n_tokens][w.n_cols], y: [n_tokens][w.n_rows]. Parallel over rows.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);

// Several matrices applied to the same input (Q/K/V, gate/up): activations
// are quantized once per activation type and all row tiles run in one
// parallel pass (one synchronisation instead of one per matrix). Each y is
// bit-identical to matmul(*w, x, y, ...). All w must have the same n_cols.
struct MatmulJob {
  const WeightView* w;
  float* y;  // [n_tokens][w->n_rows]
};
void matmul_group(const MatmulJob* jobs, int n_jobs, const float* x, int64_t n_tokens, ThreadPool& pool);

// Several matrices, each over its own input rows (the experts of a MoE layer,
// each applied to the tokens routed to it): one parallel pass quantizes every
// distinct input (jobs with the same x, n_tokens and activation format share
// it: an expert's gate and up), one runs every job's row tiles, so a layer
// costs two synchronisations however many experts it runs. Each y is
// bit-identical to matmul(*w, x, y, n_tokens, ...). Jobs with n_tokens 0 do nothing.
struct ExpertMatmulJob {
  const WeightView* w;
  const float* x;    // [n_tokens][w->n_cols]
  float* y;          // [n_tokens][w->n_rows]
  int64_t n_tokens;
};
void matmul_experts(std::span<const ExpertMatmulJob> jobs, ThreadPool& pool);

// y = x / sqrt(mean(x^2) + eps) * weight, per row of n. x may alias y.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// gate[i] = silu(gate[i]) * up[i], vectorised (kernels/elementwise.h: a
// polynomial exp, within ~1e-6 relative of swiglu_reference).
void swiglu(float* gate, const float* up, int64_t n);
// The same with libm's exp, one element at a time: the oracle for tests.
void swiglu_reference(float* gate, const float* up, int64_t n);

// gate[i] = gelu_tanh(gate[i]) * up[i] (GELU's tanh approximation, as ggml's
// and Gemma's), vectorised (kernels/elementwise.h).
void geglu(float* gate, const float* up, int64_t n);
// The same in double with libm's exp, one element at a time: the oracle.
void geglu_reference(float* gate, const float* up, int64_t n);

// x[i] = cap * tanh(x[i] / cap), cap > 0: vectorised, and libm's tanh in double.
void softcap(float* x, int64_t n, float cap);
void softcap_reference(float* x, int64_t n, float cap);

enum class RopeLayout {
  Normal,  // rotate adjacent pairs (2i, 2i+1): llama, llama2.c, mistral GGUFs
  NeoX,    // rotate (i, i + n_rot/2): qwen2, gpt-neox
};

struct RopeParams {
  RopeLayout layout = RopeLayout::Normal;
  int n_rot = 0;            // rotated dims per head (<= head_dim); the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
  // YaRN (active when yarn_orig_ctx > 0): ramp between interpolation and
  // extrapolation over dims set by beta_fast/beta_slow, attention scaled by mscale.
  int yarn_orig_ctx = 0;
  float yarn_ext_factor = 0.0f;
  float yarn_attn_factor = 1.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  // Per-pair frequency divisors, [n_rot/2], or null (the common case, which
  // costs one test per pair): pair i turns at base^(-2i/n_rot) / freq_factors[i]
  // before any scaling, as ggml_rope_ext applies its freq_factors. Llama 3.1's
  // rope_freqs.weight and Phi-3's LongRoPE factors. Backend memory (upload()).
  const float* freq_factors = nullptr;
};

// Rotates n_heads heads of head_dim values at position pos in place.
// x: [n_heads][head_dim].
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

}  // namespace tern::kernels
