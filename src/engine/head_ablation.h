// engine/head_ablation.h — how much the loss on calibration text rises when
// one layer's K/V head group (a K/V head and the query heads reading it) is
// removed alone: the importance `tern prune --structured heads=F` ranks
// head groups by (model/prune_structured.h).
//
// Removing a group is exact without writing a model: a backend that forwards
// every op zeroes the group's query heads' attention outputs in the chosen
// layer, which is what the model with those heads' rows and attn_output
// columns removed computes. One pass over the windows per group (n_layer x
// n_head_kv passes, plus one for the baseline), scored as `tern perplexity`
// scores them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/calibration.h"

namespace tern {

struct HeadAblationOptions {
  std::string model_path;
  std::string text_path;
  const CalibrationText* expect_text = nullptr;  // when set, the text must be this one (size and hash)
  int n_ctx = 512;
  int n_windows = 8;  // windows of the text used (fewer when it has fewer)
  int n_threads = 0;
};

struct HeadAblation {
  double base_nll = 0.0;                  // mean NLL (nats/token) of the windows, nothing removed
  std::vector<std::vector<double>> rise;  // [n_layer][n_head_kv] mean NLL with the group removed, minus base_nll
  int n_windows = 0;
  double seconds = 0.0;
};

using HeadAblationProgressFn = std::function<void(int pass, int n_passes)>;

// Unsupported for a model without attention in every layer or with per-layer K/V head counts that differ.
Result<HeadAblation> ablate_head_groups(const HeadAblationOptions& o, const HeadAblationProgressFn& progress = {});

}  // namespace tern
