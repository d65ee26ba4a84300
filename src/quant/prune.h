// quant/prune.h — zero a fraction of a linear layer's weights (docs/prune.md).
//
// Three ways to choose the weights, each unstructured or in an N:M pattern
// (at most N nonzero in every M consecutive weights of a row; 2:4 is the
// pattern sparse tensor cores and our sparse kernels read):
//   Magnitude  the smallest |w| of the whole matrix (with a pattern: of each group)
//   Wanda      per row, the smallest |w_ij| · ‖x_j‖, where ‖x_j‖² is the sum of
//              input column j's squares over calibration text (Sun et al., 2023);
//              no weight changes but the zeroing
//   SparseGpt  per row, column by column in input order with the Optimal Brain
//              Surgeon update (Frantar & Alistarh, 2023): the weights kept
//              absorb the error of those zeroed, through the same factor U of
//              H⁻¹ GPTQ uses (quant/obs_loop.h). The mask of each block of
//              `block_cols` columns (or each group of M) is chosen when the loop
//              reaches it, by the smallest w² / U_jj² of the compensated weights.
// Counts are exact: unstructured Magnitude zeroes round(S · rows · cols)
// weights of the matrix; Wanda and SparseGPT round(S · cols) of every row
// (SparseGPT's blocks take the difference of the rounded running targets, so
// their sum is the row's count). Ties go to the lower index, so the result is
// deterministic and independent of the thread count. SparseGPT also zeroes
// input columns no calibration row touched (H_jj = 0), as GPTQ does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/thread_pool.h"

namespace tern::quant {

enum class PruneMethod { Magnitude, Wanda, SparseGpt };
const char* prune_method_name(PruneMethod m);
Result<PruneMethod> parse_prune_method(std::string_view name);
// Whether the method reads calibration statistics (Wanda: column norms; SparseGPT: H).
inline bool prune_needs_calibration(PruneMethod m) { return m != PruneMethod::Magnitude; }

// At most n nonzero weights in every m consecutive ones of a row; m == 0: none.
struct NmPattern {
  int n = 0;
  int m = 0;
  bool active() const { return m > 0; }
  double sparsity() const { return active() ? 1.0 - static_cast<double>(n) / m : 0.0; }
  std::string text() const { return std::to_string(n) + ":" + std::to_string(m); }
};
// "2:4" and the like: 1 <= n < m <= 32.
Result<NmPattern> parse_nm_pattern(std::string_view text);

struct PruneOptions {
  PruneMethod method = PruneMethod::Magnitude;
  double sparsity = 0.5;   // fraction zeroed, in [0, 1); with a pattern it must equal pattern.sparsity()
  NmPattern pattern = {};
  double damp = 0.01;      // SparseGPT: fraction of mean(diag H) added to the diagonal
  int64_t block_cols = 128;  // SparseGPT unstructured: columns whose mask is chosen together
};

// Checks o against a row length (pattern dividing it, sparsity in range).
Status check_prune_options(const PruneOptions& o, int64_t n_cols);

// Prunes w ([n_rows][n_cols] f32, row-major) in place. col_sq: [n_cols]
// sums of x_j² over the calibration rows (Wanda); h: [n_cols][n_cols] sum of
// x xᵀ (SparseGPT). Spans a method does not read may be empty.
Status prune_matrix(const PruneOptions& o, std::span<float> w, int64_t n_rows, int64_t n_cols,
                    std::span<const double> col_sq, std::span<const double> h, ThreadPool& pool);

}  // namespace tern::quant
