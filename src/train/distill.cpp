#include "train/distill.h"

namespace tern::train {

Result<std::unique_ptr<EngineTeacher>> EngineTeacher::open(const std::string& path, int64_t n_vocab, int64_t ctx) {
  auto model = Model::load(path);
  if (!model) return model.status();
  if ((*model)->hparams().n_vocab != n_vocab)
    return error(ErrorKind::InvalidArgument, "teacher '" + path + "' has a vocabulary of " +
                                                 std::to_string((*model)->hparams().n_vocab) + " tokens, the student " +
                                                 std::to_string(n_vocab) + ": distillation needs the same tokens");
  auto runner = BatchRunner::create(**model, 1, static_cast<int32_t>(ctx));
  if (!runner) return runner.status();
  auto t = std::unique_ptr<EngineTeacher>(new EngineTeacher());
  t->model_ = std::move(*model);
  t->runner_ = std::move(*runner);
  return t;
}

Status EngineTeacher::logits(const int32_t* tokens, int64_t T, std::vector<float>& out) {
  runner_->truncate(SeqId(0), 0);
  Batch b;
  for (int64_t i = 0; i < T; ++i) b.add(tokens[i], static_cast<int32_t>(i), SeqId(0), true);
  return runner_->forward(b, out);
}

}  // namespace tern::train
