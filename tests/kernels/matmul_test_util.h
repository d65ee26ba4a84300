// tests/kernels/matmul_test_util.h — random matmul problems and their error budgets.
//
// A fast kernel computes dot(w, x̂) where w are the exact dequantized weights
// and x̂ the activations after the kernels' own quantization (act_type), with
// f32 arithmetic in some order. The scalar reference computes dot(w, x) in
// another f32 order. So for one output
//
//   |fast - ref| <= sum_j |w_j| e_j                      activation rounding
//                 + sum_blocks |m_b| * s_err_b           Q8_1's fp16 s (Q4_1, Q5_1 minimum term)
//                 + (n + 256) * 2^-24 * sum_j A_j (|x_j| + e_j)   f32 rounding, both sides
//
// with, per element j of activation block b (amax_b = max |x| over the block):
//   Q8_0, Q8_1  e_j = 0.57 * amax_b / 127: half a step of d = amax/127, plus
//               d's fp16 rounding (2^-11 relative) times |q| <= 127: 0.5 + 127/2048
//   Q8_K        e_j = 0.51 * amax_b / 127 (f32 d: half a step plus f32 slack)
//   BF16        e_j = 2^-8 |x_j| (round to nearest, 8-bit significand: unit roundoff 2^-8)
//   F32         e_j = 0
// and s_err_b = 2^-10 * (sum_j |x_j| + 32 d_b): s = fp16(d * sum q) differs
// from the decoded fp16(d) * sum(q) by two fp16 roundings.
// A_j bounds the magnitude of the partial products a kernel forms: twice the
// largest |w| of the element's block (an asymmetric type's d*q and min terms
// are each at most that). Every f32 operation has relative error <= 2^-24 and
// no path chains more than n + 256 of them.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf_format.h"
#include "kernels/matmul_kernels.h"

namespace tern::kernels::testing {

struct Problem {
  gguf::GgmlType type;
  int64_t n = 0, n_rows = 0, n_cols = 0;
  size_t w_stride = 0;        // bytes between weight rows (>= row bytes)
  std::vector<uint8_t> w;     // [n_rows][w_stride] quantized rows
  std::vector<float> w_f32;   // [n_rows][n] dequantized weights
  std::vector<float> x;       // [n_cols][n] activations
};

// Random weights (normal, some rows scaled, a few outliers) quantized with the
// type's from_float, and random activations. pad_bytes > 0 makes the weight
// row stride larger than the row.
Problem make_problem(gguf::GgmlType type, int64_t n, int64_t n_rows, int64_t n_cols, uint32_t seed,
                     size_t pad_bytes = 0);

// Reference outputs [n_cols][n_rows] from the quant traits' scalar vec_dot on f32 x.
std::vector<float> reference(const Problem& p);

// Error budget (see above) of output (r, c) for activations quantized to act_type.
double budget(const Problem& p, gguf::GgmlType act_type, int64_t r, int64_t c);
// All of them: [n_cols][n_rows].
std::vector<double> budgets(const Problem& p, gguf::GgmlType act_type);

// Quantize every activation row with k.quantize_act: [n_cols][x_stride] bytes.
std::vector<uint8_t> quantize_activations(const MatmulKernels& k, const Problem& p, size_t x_stride);

// Levels without float kernels of their own (Arm's NeonDot and NeonI8mm).
bool adds_integer_instructions_only(CpuLevel level);

// The levels this CPU runs, Scalar first.
std::vector<CpuLevel> available_levels();

}  // namespace tern::kernels::testing
