// train/trainer.h — language-model training steps over a token stream, with
// checkpoints that resume exactly, and the files a run writes: the trained
// model (GGUF) and its loss curve (SVG). `tern train` is this plus argument
// parsing (docs/train.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "train/llama.h"
#include "train/optimizer.h"

namespace tern::train {

struct TrainOptions {
  int64_t steps = 100;  // optimizer steps in the whole run
  int64_t ctx = 128;    // tokens per sequence
  int64_t batch = 4;    // sequences per step, their gradients averaged (micro-batches of one sequence)
  LrSchedule lr;        // total is set to steps by the caller
  AdamWConfig adamw;
  double clip = 1.0;    // joint gradient L2 norm bound; 0: no clipping
  uint64_t seed = 1;    // which windows of the text each step reads
  // Distillation (tern distill): when set, a sequence's loss is
  // kd_alpha · τ²·KL(p_teacher ‖ p_student) + (1 − kd_alpha) · cross-entropy
  // (p = softmax(logits / τ), τ = temperature), the teacher's logits
  // [T][n_vocab] from this function (train/distill.h).
  std::function<Status(const int32_t* tokens, int64_t T, std::vector<float>& logits)> teacher;
  double temperature = 2.0;
  double kd_alpha = 1.0;
  // Weights of the matrices that are exactly zero when the run starts stay
  // zero (recovery after unstructured or N:M pruning keeps the sparsity).
  bool keep_zeros = false;
};

struct TrainState {
  std::vector<float> params, m, v;  // LlamaLayout order; m, v: AdamW's moments
  int64_t step = 0;                 // steps done
  std::vector<double> losses;       // mean loss of each step done
};

struct StepReport {
  int64_t step = 0;  // steps done, 1-based
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  int64_t tokens = 0;  // tokens of this step
};

// Where sequence k of step s starts in a stream of n tokens: a function of
// (seed, s, k) alone, so a resumed run reads what the uninterrupted one would.
int64_t window_start(uint64_t seed, int64_t step, int64_t k, int64_t n_tokens, int64_t ctx);

// Runs steps from state.step up to o.steps (or until `after_step` returns
// false: an interrupted run). InvalidArgument when the text is shorter than
// one sequence plus one token.
Status train_steps(const LlamaLayout& layout, const std::vector<int32_t>& tokens, const TrainOptions& o,
                   TrainState& state, ThreadPool& pool, const std::function<bool(const StepReport&)>& after_step = {});

// Checkpoints are GGUF files (general.architecture "tern-train-checkpoint")
// holding each parameter tensor, its two moments (<name>.adam_m, .adam_v),
// the losses so far, the step and the options that decide the data; written
// atomically. Reading one checks it against the layout and the options.
Status write_checkpoint(const std::string& path, const LlamaLayout& layout, const TrainOptions& o, const TrainState& s);
Result<TrainState> read_checkpoint(const std::string& path, const LlamaLayout& layout, const TrainOptions& o);

// The trained model: `init`'s metadata and tensors, with the parameters
// (F32) in place of its weights, plus tern.train.* keys; written atomically.
Status write_trained_model(const gguf::GgufFile& init, const LlamaLayout& layout, const std::vector<float>& params,
                           const std::string& path, const TrainOptions& o, const std::vector<double>& losses);

// A line chart of the loss per step (SVG text).
std::string loss_curve_svg(const std::vector<double>& losses, const std::string& title);

}  // namespace tern::train
