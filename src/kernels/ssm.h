// kernels/ssm.h — the two kernels of a Mamba (selective state-space) mixer,
// one table per CPU level, over one sequence's run of consecutive tokens and
// a range of channels [c0, c1) (channels are independent: a backend splits
// them across threads, and a channel's result does not depend on the split,
// the run's length or the other sequences of the pass).
//
//   conv   causal depthwise convolution of width d_conv over time, + bias,
//          then SiLU. The run continues the d_conv - 1 inputs kept in
//          conv_state ([d_conv - 1][d_inner], oldest first), which it
//          updates to the run's last d_conv - 1 inputs.
//   scan   the selective scan of Mamba-1, per channel c and state s:
//            dt' = softplus(dt[t][c])
//            h[c][s] = h[c][s] * e^(dt' A[c][s]) + B[t][s] dt' x[t][c]
//            y[t][c] = (sum_s h[c][s] C[t][s] + D[c] x[t][c]) * silu(z[t][c])
//          with h the ssm_state ([d_state][d_inner]: state s of every
//          channel side by side), updated in place.
//          Mamba-2 (head_dim > 0): channel c is in head c / head_dim, whose
//          dt (+ dt_bias), A and D are one value each, and that head's group
//          g = head / (heads / n_group) has B and C (d_state values each):
//            dt' = softplus(dt[t][head] + dt_bias[head])
//            h[c][s] = h[c][s] * e^(dt' A[head]) + B[t][g][s] dt' x[t][c]
//            y[t][c] = (sum_s h[c][s] C[t][g][s] + D[head] x[t][c]) * silu(z[t][c])
//          with h [d_inner][d_state] (a channel's states side by side, as
//          llama.cpp keeps them; its B and C rows are vectors too).
//
// Written once with 16-lane vectors (ops/ssm_impl.h) and compiled per level,
// 16 channels per vector: the scan keeps a channel block's state in
// registers over the run's tokens, with no horizontal sums (Mamba-2: one
// channel's states per vector group, in registers, one sum per token). e^x, log1p and
// SiLU are polynomials (ops/exp_poly.h, ~1e-7 relative).
// A prompt runs the same per-token recurrence as decode, so a prompt in any
// chunking gives the state one-token-at-a-time decode gives, bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace tern::kernels {

struct SsmDims {
  int d_inner = 0;
  int d_conv = 0;
  int d_state = 0;
};

// A copy of the state taken inside a run: after `after` tokens (1..n_tokens),
// the conv inputs kept and h are written to conv and ssm (the layouts of the
// run's own state) as well (prefix caching of a prompt's state).
struct SsmSnap {
  int64_t after = 0;
  float* conv = nullptr;
  float* ssm = nullptr;
};

struct SsmConvArgs {
  SsmDims dims;
  int64_t n_tokens = 0;
  float* conv_state = nullptr;  // [d_conv - 1][d_inner]
  const float* x = nullptr;     // [n_tokens][x_stride], channels at the start of a row
  int64_t x_stride = 0;
  const float* w =
      nullptr;  // [d_conv][d_inner]: tap k of every channel (the file's [d_inner][d_conv], transposed)
  const float* bias = nullptr;  // [d_inner]
  float* out = nullptr;         // [n_tokens][d_inner]
  const SsmSnap* snaps = nullptr;  // [n_snaps], any order
  int n_snaps = 0;
};

struct SsmScanArgs {
  SsmDims dims;
  int64_t n_tokens = 0;
  float* state = nullptr;     // [d_state][d_inner]; Mamba-2: [d_inner][d_state]
  const float* x = nullptr;   // [n_tokens][x_stride], channels at the start of a row
  int64_t x_stride = 0;
  const float* dt = nullptr;  // [n_tokens][dt_stride], before softplus: d_inner values (Mamba-2: one per head)
  int64_t dt_stride = 0;
  const float* a = nullptr;   // [d_state][d_inner] (the file's [d_inner][d_state], transposed); Mamba-2: [heads]
  const float* b = nullptr;   // [n_tokens][bc_stride]: d_state values each (Mamba-2: of each group)
  const float* c = nullptr;   // [n_tokens][bc_stride]
  int64_t bc_stride = 0;
  const float* d = nullptr;  // [d_inner]; Mamba-2: [heads]
  int head_dim = 0;                 // Mamba-2: channels per head; 0: Mamba-1
  int n_group = 1;                  // Mamba-2: groups of heads sharing B and C
  const float* dt_bias = nullptr;   // Mamba-2: [heads], added to dt
  const float* z = nullptr;  // [n_tokens][z_stride]: the gate, channels at the start
  int64_t z_stride = 0;
  float* y = nullptr;  // [n_tokens][d_inner]
  const SsmSnap* snaps = nullptr;  // [n_snaps], any order
  int n_snaps = 0;
};

struct SsmKernels {
  void (*conv)(const SsmConvArgs& a, int c0, int c1);
  void (*scan)(const SsmScanArgs& a, int c0, int c1);
};

const SsmKernels& ssm_kernels();
// The table compiled for `level`, or nullptr when this CPU cannot run it.
const SsmKernels* ssm_kernels_at(CpuLevel level);

}  // namespace tern::kernels
