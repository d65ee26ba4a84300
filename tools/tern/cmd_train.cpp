// tern train -m INIT.gguf -f TEXT -o OUT.gguf [--steps N] [--ctx T] [--batch B] [--lr LR] [--lr-min LR]
//            [--warmup N] [--weight-decay WD] [--clip C] [--seed S] [--checkpoint CKPT [--checkpoint-every N]]
//            [--resume CKPT] [--loss-svg SVG] [-t THREADS]
// tern distill --teacher T.gguf --student S.gguf -f TEXT -o OUT.gguf [--temperature 2] [--alpha 1] (and train's options)
// Language-model training of a Llama-family GGUF on a text, or distillation of
// a teacher's output distributions into it (train/trainer.h, docs/train.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "args.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/input_file.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "train/distill.h"
#include "train/trainer.h"

namespace tern::cli {

namespace {

int train_or_distill(int argc, char** argv, bool distill) {
  const char* cmd = distill ? "distill" : "train";
  std::string init_path, teacher_path, text_path, out_path, checkpoint, resume, svg_path;
  train::TrainOptions o;
  float lr = 3e-4f, lr_min = -1.0f, wd = 0.1f, clip = 1.0f, temperature = 2.0f, alpha = 0.5f;
  int64_t warmup = -1, checkpoint_every = 0;
  uint64_t seed = 1;
  int n_threads = 0;
  ArgParser args(cmd, distill ? "tern distill --teacher T.gguf --student S.gguf -f TEXT -o OUT.gguf [--temperature TAU] "
                                "[--alpha A] [--steps N] [--ctx T] [--batch B] [--lr LR] [--checkpoint CKPT] "
                                "[--resume CKPT] [--loss-svg SVG] [-t THREADS]"
                              : "tern train -m INIT.gguf -f TEXT -o OUT.gguf [--steps N] [--ctx T] [--batch B] [--lr LR] "
                                "[--checkpoint CKPT] [--resume CKPT] [--loss-svg SVG] [-t THREADS]");
  if (distill) {
    args.add("--teacher", &teacher_path, "the model whose output distributions the student learns (any model tern runs)");
    args.add("-m,--student", &init_path, "the student to start from (a Llama-family GGUF, e.g. a pruned teacher)");
    args.add("--temperature", &temperature, "softmax temperature of both distributions (default 2)");
    args.add("--alpha", &alpha, "weight of the KL loss; 1 - alpha goes to the text's cross-entropy (default 0.5)");
  } else {
    args.add("-m,--model", &init_path, "the model to start from (a Llama-family GGUF, any type tern reads)");
  }
  args.add("-f,--file", &text_path, "training text");
  args.add("-o,--output", &out_path, "trained model to write (F32 weights, the input's tokenizer and metadata)");
  args.add("--steps", &o.steps, "optimizer steps (default 100)");
  args.add("--ctx", &o.ctx, "tokens per sequence (default 128)");
  args.add("--batch", &o.batch, "sequences per step, gradients averaged (default 4)");
  args.add("--lr", &lr, "peak learning rate (default 3e-4)");
  args.add("--lr-final", &lr_min, "learning rate at the last step, after the cosine (default lr / 10)");
  args.add("--warmup", &warmup, "steps of linear warm-up (default steps / 20)");
  args.add("--weight-decay", &wd, "AdamW weight decay of the matrices (default 0.1; norms none)");
  args.add("--clip", &clip, "bound on the gradients' joint L2 norm (default 1; 0: none)");
  args.add("--seed", &seed, "which windows of the text each step reads (default 1)");
  args.add("--checkpoint", &checkpoint, "checkpoint file, rewritten every --checkpoint-every steps and at the end");
  args.add("--checkpoint-every", &checkpoint_every, "steps between checkpoints (default: steps / 10)");
  args.add("--resume", &resume, "continue from this checkpoint (same --seed, --ctx, --batch, --steps)");
  bool keep_zeros = false;
  args.add_flag("--keep-zeros", &keep_zeros,
                "matrix weights that are zero at the start stay zero (on by itself for a model tern prune zeroed)");
  args.add("--loss-svg", &svg_path, "write the loss curve (SVG)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (init_path.empty() || text_path.empty() || out_path.empty() || (distill && teacher_path.empty()))
    return report(error(ErrorKind::InvalidArgument, distill ? "distill: --teacher, --student, -f TEXT and -o OUT.gguf are required"
                                                            : "train: -m INIT.gguf, -f TEXT and -o OUT.gguf are required"));
  if (distill && (!(temperature > 0.0f && temperature <= 100.0f) || !(alpha >= 0.0f && alpha <= 1.0f)))
    return report(error(ErrorKind::InvalidArgument, "distill: --temperature must be in (0, 100], --alpha in [0, 1]"));
  o.temperature = temperature;
  o.kd_alpha = alpha;
  if (o.steps < 1 || o.ctx < 2 || o.batch < 1 || n_threads < 0 || checkpoint_every < 0)
    return report(error(ErrorKind::InvalidArgument, std::string(cmd) + ": --steps and --batch must be >= 1, --ctx >= 2, -t and --checkpoint-every >= 0"));
  if (!(lr > 0.0f && lr < 10.0f) || !(wd >= 0.0f) || !(clip >= 0.0f))
    return report(error(ErrorKind::InvalidArgument, std::string(cmd) + ": --lr must be in (0, 10), --weight-decay and --clip >= 0"));
  o.lr.lr_max = lr;
  o.lr.lr_min = lr_min >= 0.0f ? lr_min : lr / 10.0f;
  o.lr.warmup = warmup >= 0 ? warmup : o.steps / 20;
  o.lr.total = o.steps;
  o.adamw.weight_decay = wd;
  o.clip = clip;
  o.seed = seed;
  if (checkpoint_every == 0) checkpoint_every = std::max<int64_t>(1, o.steps / 10);

  auto file = gguf::GgufFile::open(init_path);
  if (!file) return report(file.status());
  o.keep_zeros = keep_zeros || file->find("tern.prune.method") != nullptr;
  auto shape = train::llama_shape(*file);
  if (!shape) return report(shape.status().with_context(init_path));
  const train::LlamaLayout layout = train::LlamaLayout::make(*shape);
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok) return report(tok.status().with_context(init_path));
  auto text = read_file(text_path);
  if (!text) return report(text.status());
  const std::vector<TokenId> ids = (*tok)->encode(*text, true, false);
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  if (static_cast<int64_t>(tokens.size()) < o.ctx + 1)
    return report(error(ErrorKind::InvalidArgument, std::string(cmd) + ": '" + text_path + "' has " + std::to_string(tokens.size()) +
                                                        " tokens, fewer than one sequence of --ctx " + std::to_string(o.ctx) + " plus one"));
  std::unique_ptr<train::EngineTeacher> teacher;
  if (distill) {
    auto t = train::EngineTeacher::open(teacher_path, shape->n_vocab, o.ctx);
    if (!t) return report(t.status());
    teacher = std::move(*t);
    o.teacher = [&](const int32_t* seq, int64_t n, std::vector<float>& logits) { return teacher->logits(seq, n, logits); };
  }
  train::TrainState st;
  if (!resume.empty()) {
    auto r = train::read_checkpoint(resume, layout, o);
    if (!r) return report(r.status());
    st = std::move(*r);
  } else {
    auto p = train::load_params(*file, layout);
    if (!p) return report(p.status().with_context(init_path));
    st.params = std::move(*p);
  }
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  const bool tty = isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = st.step;
  std::fprintf(stderr, "tern: %s %s (%zu parameters) on %zu tokens of %s%s: steps %lld-%lld, %lld x %lld tokens a step%s\n",
               distill ? "distilling into" : "training", init_path.c_str(), layout.n_params, tokens.size(), text_path.c_str(),
               distill ? (" from " + teacher_path).c_str() : "", static_cast<long long>(first + 1),
               static_cast<long long>(o.steps), static_cast<long long>(o.batch), static_cast<long long>(o.ctx),
               o.keep_zeros ? "; zero weights stay zero" : "");
  Status saved = Status::ok();
  auto s = train::train_steps(layout, tokens, o, st, pool, [&](const train::StepReport& r) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_step = elapsed / static_cast<double>(r.step - first);
    const double tok_s = static_cast<double>(r.tokens) * static_cast<double>(r.step - first) / elapsed;
    const int width = 24, done = static_cast<int>(width * r.step / o.steps);
    if (tty || r.step == o.steps || r.step % checkpoint_every == 0)
      std::fprintf(stderr, "%s[%.*s%*s] step %lld/%lld loss %.4f lr %.2e |g| %.3f %.0f tok/s ETA %.0f s%s",
                   tty ? "\r" : "", done, "########################", width - done, "",
                   static_cast<long long>(r.step), static_cast<long long>(o.steps), r.loss, r.lr, r.grad_norm, tok_s,
                   per_step * static_cast<double>(o.steps - r.step), tty ? "" : "\n");
    if (!checkpoint.empty() && (r.step % checkpoint_every == 0 || r.step == o.steps)) {
      saved = train::write_checkpoint(checkpoint, layout, o, st);
      if (!saved) return false;
    }
    return true;
  });
  if (tty) std::fputc('\n', stderr);
  if (!s) return report(s);
  if (!saved) return report(saved.with_context("checkpoint"));
  if (auto w = train::write_trained_model(*file, layout, st.params, out_path, o, st.losses); !w) return report(w);
  if (!svg_path.empty())
    if (auto w = write_file_atomically(svg_path, train::loss_curve_svg(st.losses, std::string("tern ") + cmd + ": " + init_path)); !w)
      return report(w);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "tern: wrote %s: loss %.4f -> %.4f over steps %lld-%lld, %.0f tok/s, %.1f s\n", out_path.c_str(),
               st.losses.empty() ? NAN : st.losses[static_cast<size_t>(first < st.step ? first : 0)],
               st.losses.empty() ? NAN : st.losses.back(), static_cast<long long>(first + 1),
               static_cast<long long>(st.step),
               static_cast<double>((st.step - first) * o.batch * o.ctx) / std::max(secs, 1e-9), secs);
  return 0;
}

}  // namespace

int cmd_train(int argc, char** argv) { return train_or_distill(argc, argv, false); }
int cmd_distill(int argc, char** argv) { return train_or_distill(argc, argv, true); }

}  // namespace tern::cli
