// tern perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [--json]
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/mmap.h"
#include "engine/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace tern::cli {

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, text_path;
  int n_ctx = 512, n_chunks = 0, n_threads = 0;
  bool json = false;
  ArgParser args("perplexity", "tern perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [--json]");
  args.add("-m,--model", &model_path, "GGUF model file");
  args.add("-f,--file", &text_path, "text file to score");
  args.add("-c,--ctx-size", &n_ctx, "window size in tokens (default 512)");
  args.add("--chunks", &n_chunks, "score only the first N windows (default all)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add_flag("--json", &json, "print {\"perplexity\", \"tokens\", \"windows\"} as JSON");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model_path.empty() || text_path.empty())
    return report(error(ErrorKind::InvalidArgument, "perplexity: -m MODEL and -f TEXT are required"));
  if (n_chunks < 0 || n_threads < 0) return report(error(ErrorKind::InvalidArgument, "perplexity: negative count"));
  auto text = read_file(text_path);
  if (!text) return report(text.status());
  auto model = Model::load(model_path);
  if (!model) return report(model.status());
  auto tok = Tokenizer::from_gguf((*model)->file());
  if (!tok) return report(tok.status().with_context(model_path));
  if (n_ctx > (*model)->hparams().n_ctx_train)
    std::fprintf(stderr, "tern: warning: -c %d exceeds the model's training context %d\n", n_ctx,
                 (*model)->hparams().n_ctx_train);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenId> tokens = (*tok)->encode(*text, true, false);
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.max_windows = n_chunks;
  o.add_bos = (*tok)->add_bos();
  o.bos = (*tok)->bos_id();
  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  const bool tty = isatty(STDERR_FILENO);
  auto res = compute_perplexity(**model, tokens, o, pool, [&](int w, double ppl) {
    if (tty) std::fprintf(stderr, "\rwindow %d: perplexity %.4f", w + 1, ppl);
  });
  if (tty) std::fputc('\n', stderr);
  if (!res) return report(res.status());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::printf("{\"perplexity\": %.6f, \"tokens\": %lld, \"windows\": %d}\n", res->perplexity,
                static_cast<long long>(res->n_scored), res->n_windows);
  } else {
    std::printf("perplexity: %.4f (%lld tokens scored in %d windows of %d)\n", res->perplexity,
                static_cast<long long>(res->n_scored), res->n_windows, n_ctx);
  }
  std::fprintf(stderr, "tern: %zu tokens in the text, %.1f s, %.1f tok/s evaluated\n", tokens.size(), s,
               res->n_windows * static_cast<double>(n_ctx) / s);
  return 0;
}

}  // namespace tern::cli
