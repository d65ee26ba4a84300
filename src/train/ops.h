// train/ops.h — the training core's operations: each forward with what its
// backward needs saved, and the exact backward (issue 21; docs/train.md).
//
// Layouts follow the inference side so a trained model writes straight to
// GGUF: a matrix W [n_out][n_in] is row-major with rows of n_in (GGUF's
// dims[0] = n_in), activations are [n_tokens][width]. Every op is a template
// on the float type and instantiated for float (training, F32 master
// weights) and double (the tests check each backward against central finite
// differences in double precision). Backward functions ADD into their
// gradient outputs (gradients accumulate over micro-batches); callers zero
// them once per step.
//
// One sequence of T tokens at positions 0..T-1 per call (micro-batches are
// sequences run one after another, their gradients accumulated).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace tern::train {

// out[t] = table[tokens[t]] (rows of C).
template <typename F>
void embedding_forward(const F* table, const int32_t* tokens, int64_t T, int64_t C, F* out);
template <typename F>
void embedding_backward(const F* dout, const int32_t* tokens, int64_t T, int64_t C, F* dtable);

// out = x / rms(x) * w per row; rstd [T] saved: 1 / sqrt(mean(x²) + eps).
template <typename F>
void rmsnorm_forward(const F* x, const F* w, int64_t T, int64_t C, F eps, F* out, F* rstd);
template <typename F>
void rmsnorm_backward(const F* dout, const F* x, const F* w, const F* rstd, int64_t T, int64_t C, F* dx, F* dw);

// out [T][N] = x [T][K] · Wᵀ (W [N][K]), split over the pool's threads by
// rows of out; backward: dx += dout · W, dW += doutᵀ · x (split by rows of
// dx and of dW: each thread owns what it writes, so the sums do not depend
// on the thread count).
template <typename F>
void linear_forward(const F* x, const F* W, int64_t T, int64_t K, int64_t N, F* out, ThreadPool& pool);
template <typename F>
void linear_backward(const F* dout, const F* x, const F* W, int64_t T, int64_t K, int64_t N, F* dx, F* dW,
                     ThreadPool& pool);

// out = silu(gate) · up, elementwise over n values.
template <typename F>
void swiglu_forward(const F* gate, const F* up, int64_t n, F* out);
template <typename F>
void swiglu_backward(const F* dout, const F* gate, const F* up, int64_t n, F* dgate, F* dup);

// Rotary position embedding in place over x [T][H][D], token t at position t:
// pair i of a head is (x[2i], x[2i+1]) (neox = false: GGUF Llama files, whose
// Q/K rows the converters permute so) or (x[i], x[i + D/2]) (neox = true),
// turned by t · base^(-2i/D). Backward turns the gradient back: the rotation
// is orthogonal, so its transpose is the rotation by minus the angle.
template <typename F>
void rope_forward(F* x, int64_t T, int64_t H, int64_t D, F base, bool neox);
template <typename F>
void rope_backward(F* dx, int64_t T, int64_t H, int64_t D, F base, bool neox);

// Causal attention of one sequence: q [T][H][D], k and v [T][Hkv][D] (query
// head h reads K/V head h / (H / Hkv)), out [T][H][D], scores scaled by
// `scale`. Saves lse [T][H], each row's log-sum-exp; memory is O(T·D) per
// thread, never a T×T matrix: backward recomputes each row's
// probabilities from q, k and lse (as flash attention does).
template <typename F>
void attention_forward(const F* q, const F* k, const F* v, int64_t T, int64_t H, int64_t Hkv, int64_t D, F scale,
                       F* out, F* lse, ThreadPool& pool);
template <typename F>
void attention_backward(const F* dout, const F* q, const F* k, const F* v, const F* out, const F* lse, int64_t T,
                        int64_t H, int64_t Hkv, int64_t D, F scale, F* dq, F* dk, F* dv, ThreadPool& pool);

// Mean cross-entropy of logits [T][V] against targets (a target < 0 is not
// scored). Returns the mean over scored rows; dlogits (when given) gets
// (softmax − onehot) / n_scored added, 0 on unscored rows.
template <typename F>
double cross_entropy(const F* logits, const int32_t* targets, int64_t T, int64_t V, F* dlogits);

// Distillation loss: mean over rows of τ² · KL(p_t ‖ p_s), p = softmax(z / τ)
// of the teacher's and the student's logits (Hinton et al.: the τ² keeps the
// gradient's scale as τ changes). dstudent (when given) gets
// τ · (p_s − p_t) / T added; the teacher is a constant.
template <typename F>
double kl_distill(const F* student, const F* teacher, int64_t T, int64_t V, F temperature, F* dstudent);

}  // namespace tern::train
