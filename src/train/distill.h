// train/distill.h — a teacher for distillation: any model the inference
// engine runs (any architecture and type), giving the logits of every
// position of a window (train/trainer.h: TrainOptions::teacher).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/batch_runner.h"
#include "model/model.h"

namespace tern::train {

class EngineTeacher {
 public:
  // InvalidArgument when the teacher's vocabulary size is not n_vocab (the
  // student's: distillation compares distributions over the same tokens).
  static Result<std::unique_ptr<EngineTeacher>> open(const std::string& path, int64_t n_vocab, int64_t ctx);
  // logits: [T][n_vocab], T <= ctx, the sequence at positions 0..T-1.
  Status logits(const int32_t* tokens, int64_t T, std::vector<float>& out);

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchRunner> runner_;
};

}  // namespace tern::train
