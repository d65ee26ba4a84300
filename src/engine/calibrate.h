// engine/calibrate.h — fill a Calibration (model/calibration.h) by running a
// model over calibration text.
//
// The text is tokenized and cut into windows exactly as `tern perplexity`
// does (engine/perplexity.h), and the windows run through the model behind
// a backend that forwards every op to the real one and, on each matmul, adds
// the input rows to the statistics of the matrix applied (and to its H when
// asked for). The forward pass itself is unchanged: the same logits, and the
// calibration text's perplexity comes out as a by-product.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "core/status.h"
#include "model/calibration.h"
#include "model/quantize.h"

namespace tern {

struct CalibrationOptions {
  std::string model_path;  // a GGUF file
  std::string text_path;
  int n_ctx = 512;
  int n_chunks = 0;  // 0: every window of the text
  int n_threads = 0;
  // Tensors to collect H for (a 3-D expert tensor's name covers all its experts).
  std::set<std::string> hessians;
  // When set, the text must have exactly this size and hash (GPTQ recomputing
  // H from the text a calibration file names).
  const CalibrationText* expect_text = nullptr;
};

struct CalibrationRun {
  Calibration calibration;
  double perplexity = 0.0;  // of the calibration windows
  double seconds = 0.0;
};

using CalibrationProgressFn = std::function<void(int window, int n_windows)>;

// InvalidArgument when the text is shorter than one window or differs from expect_text.
Result<CalibrationRun> calibrate(const CalibrationOptions& o, const CalibrationProgressFn& progress = {});

}  // namespace tern

namespace tern {

// Statistics for quantize_gguf (model/quantize.h: InputStatsFn) under a
// calibrated method. Imatrix: read from a calibration file. Gptq and Awq
// (need_h; `plan` lists the tensors whose H is read): H is recomputed from the text the file names (checked by size and hash;
// `text_path` overrides the path), in as few passes as `budget_bytes` of H
// allows — the tensors in file order, a new pass when the next tensor's H
// would not fit — each pass run when quantization reaches its first tensor.
class CalibrationSource {
 public:
  static Result<std::unique_ptr<CalibrationSource>> open(const std::string& calib_path, const std::string& model_path,
                                                         bool need_h, std::vector<GptqTensor> plan,
                                                         const std::string& text_path, uint64_t budget_bytes,
                                                         int n_threads);
  // open() with the plan `method` needs under `scheme`: GPTQ's tensors
  // (gptq_plan), AWQ's groups (awq_plan), or none (imatrix reads the file only).
  static Result<std::unique_ptr<CalibrationSource>> for_method(QuantMethod method, const QuantScheme& scheme,
                                                               const std::string& calib_path,
                                                               const std::string& model_path,
                                                               const std::string& text_path, uint64_t budget_bytes,
                                                               int n_threads);
  Result<std::shared_ptr<const InputStats>> get(const std::string& key);
  int passes() const { return passes_; }
  const Calibration& file() const { return file_; }
  int n_groups() const { return group_of_.empty() ? 0 : group_of_.back() + 1; }
  // Called before each pass that computes H (pass index from 0, number of passes).
  std::function<void(int pass, int n_passes)> on_pass;

 private:
  Calibration file_;
  CalibrationOptions base_;
  bool need_h_ = false;
  std::vector<GptqTensor> plan_;
  std::vector<int> group_of_;  // [plan_] pass index of each tensor
  int current_ = -1;
  int passes_ = 0;
  Calibration pass_;  // the current pass's statistics, with H
};

}  // namespace tern
