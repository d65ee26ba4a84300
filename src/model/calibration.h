// model/calibration.h — what the inputs of a model's linear layers look like
// on calibration text: the statistics that importance-weighted rounding and
// GPTQ (quant/gptq.h) quantize against.
//
// engine/calibrate.h fills it by running the model over calibration text,
// accumulating on each matmul, for the matrix it applies:
//   count, per input column sum x², sum |x|, max |x|   (always; small)
//   H = sum x xᵀ over the rows                          (only for the tensors asked for)
// and, per layer, how similar the residual stream leaving it is to the one
// entering it (block_cos).
// Matrices applied to the same input in one call (Q/K/V, gate/up) share one
// record. The output matrix sees only the rows whose logits are computed (the
// scored second half of each window). MoE experts are recorded one by one,
// keyed "<tensor>#<expert>".
//
// H is not stored in calibration files: it has n_cols² entries per input (GBs
// for a 1B model), while recomputing it is one forward pass over the
// calibration text. A file (CALIB.gguf) keeps the per-column statistics, the
// text's path, size and hash (so GPTQ can recompute H from the same text and
// refuse a changed one), and fingerprints of the text that let evaluation
// refuse text overlapping it (check_disjoint).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash.h"  // fnv1a64: the text hash
#include "core/status.h"

namespace tern {

struct InputStats {
  int64_t n_cols = 0;
  int64_t count = 0;             // rows seen
  std::vector<double> sum_x2;    // [n_cols]
  std::vector<double> sum_abs;   // [n_cols]
  std::vector<float> max_abs;    // [n_cols]
  std::vector<double> h;         // [n_cols][n_cols] sum of x xᵀ, or empty when not collected

  // Importance of each input column for weighted rounding: mean x² (the
  // expected squared output error per unit of squared weight error).
  std::vector<float> importance() const;
};

struct CalibrationText {
  std::string path;
  uint64_t bytes = 0;
  uint64_t hash = 0;  // FNV-1a 64 of the bytes
  int n_ctx = 512;
  int n_chunks = 0;   // windows used (0 in options: all)
  int64_t n_tokens = 0;
};

struct Calibration {
  CalibrationText text;
  // Per matrix (tensor name, or "<tensor>#<expert>"); tensors fed the same
  // input in one call point to the same record.
  std::map<std::string, std::shared_ptr<InputStats>> inputs;
  // Sorted fingerprints of the calibration text (fingerprints()).
  std::vector<uint64_t> fingerprints;
  // Per layer: the mean over calibration tokens of cos(x_in, x_out), the
  // residual stream entering and leaving the layer, and the tokens averaged
  // (0: never measured). 1 - mean is ShortGPT's block influence: how much a
  // layer changes its input, which `tern prune --structured layers=N` ranks
  // layers by. Empty in files from before it was recorded.
  std::vector<double> block_cos;
  std::vector<int64_t> block_rows;

  const InputStats* find(const std::string& key) const;
};

Status write_calibration(const Calibration& c, const std::string& path);
// Reads the statistics (no H) back.
Result<Calibration> read_calibration(const std::string& path);

// Fingerprints of text: a hash of every kWindow-byte window starting at a
// multiple of kStride. Two texts that share a run of kWindow + kStride - 1
// bytes or more always share a fingerprint.
inline constexpr int kFingerprintWindow = 256;
inline constexpr int kFingerprintStride = 128;
std::vector<uint64_t> text_fingerprints(std::string_view text);
// Bytes of `eval_text` found in the calibration text (an estimate: windows of
// eval_text, at every offset, whose hash is a calibration fingerprint, times
// kFingerprintStride).
uint64_t overlap_bytes(const Calibration& c, std::string_view eval_text);
// InvalidArgument naming both texts when more than 1% of eval_text (or
// more than 64 KiB) is calibration text.
Status check_disjoint(const Calibration& c, std::string_view eval_text, const std::string& eval_path);
// InvalidArgument when `text` (read from `path`) is not the text `want`
// describes (its size and FNV-1a hash).
Status check_calibration_text(const CalibrationText& want, std::string_view text, const std::string& path);


}  // namespace tern
