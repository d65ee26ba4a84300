// tern perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [--json] [--kv-type T]
//                 [--save-logits BASE.bin | --kl-divergence BASE.bin]
// tern perplexity -m MODEL -f TEXT --continuous [--modes M] [--segment N] ...  (perplexity_continuous.h)
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "args.h"
#include "backend_flag.h"
#include "commands.h"
#include "core/input_file.h"
#include "core/kv_format.h"
#include "engine/kv_budget.h"
#include "engine/perplexity.h"
#include "logits_pass.h"
#include "model/hf_model.h"
#include "perplexity_continuous.h"
#include "tokenizer/tokenizer.h"

namespace tern::cli {

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, text_path;
  int n_ctx = 512, n_chunks = 0, n_threads = 0;
  bool json = false;
  std::string backend_name = "cpu";
  std::string save_logits, kl_base, kv_type = "f32";
  ArgParser args("perplexity",
                 "tern perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [--json] [--kv-type T] [--save-logits F | --kl-divergence F]");
  args.add("-m,--model", &model_path, "GGUF model file");
  args.add("-f,--file", &text_path, "text file to score (regular file, up to 1 GiB)");
  int n_ctx_flag = 0;
  args.add("-c,--ctx-size", &n_ctx_flag, "window size in tokens (default 512); with --continuous, the context a shift works in (default the model's)");
  args.add("--chunks", &n_chunks, "score only the first N windows (default all)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add("--backend", &backend_name, kBackendHelp);
  args.add_flag("--json", &json, "print {\"perplexity\", \"tokens\", \"windows\"} as JSON");
  args.add("--save-logits", &save_logits, "save the scored distributions to F (the base for --kl-divergence)");
  args.add("--kv-type", &kv_type,
           "K/V cache encoding: f32 (default: no loss), f16, q8_0, q4_0 or fp8; with --kl-divergence against f32 logits it measures what the cache costs");
  args.add("--kl-divergence", &kl_base, "compare with base distributions saved in F: KL, top-1 agreement, PPL ratio");
  bool continuous = false;
  ContinuousOptions co;
  args.add_flag("--continuous", &continuous,
                "score the text as ONE sequence (no windows), perplexity per segment, under each of --modes");
  args.add("--modes", &co.modes,
           "with --continuous, space-separated: dense, SINKS,WINDOW (StreamingLLM; 0,W a plain window), shift[:SINKS] "
           "(context shift in -c), recompute:W (each token from the W before it, recomputed). Default \"dense 4,508 0,508\"");
  args.add("--segment", &co.segment, "with --continuous: tokens per reported segment (default 1000)");
  args.add("--max-tokens", &co.max_tokens, "with --continuous: score only the text's first N tokens (default all)");
  args.add("--chart", &co.chart_path, "with --continuous: write the per-segment perplexities as an SVG chart to F");
  args.add("--json-out", &co.json_path, "with --continuous: write the figures as JSON to F");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model_path.empty() || text_path.empty())
    return report(error(ErrorKind::InvalidArgument, "perplexity: -m MODEL and -f TEXT are required"));
  if (n_chunks < 0 || n_threads < 0 || n_ctx_flag < 0)
    return report(error(ErrorKind::InvalidArgument, "perplexity: negative count"));
  if (n_ctx_flag > 0) n_ctx = n_ctx_flag;
  if (!save_logits.empty() && !kl_base.empty())
    return report(error(ErrorKind::InvalidArgument, "perplexity: --save-logits and --kl-divergence are separate runs"));
  const std::optional<KvType> kv = parse_kv_type(kv_type);
  if (!kv)
    return report(error(ErrorKind::InvalidArgument, "perplexity: --kv-type '" + kv_type + "': expected " + kv_type_choices()));
  auto text = read_file(text_path);
  if (!text) return report(text.status());
  if (continuous) {
    if (!save_logits.empty() || !kl_base.empty() || n_chunks != 0)
      return report(error(ErrorKind::InvalidArgument, "perplexity: --continuous scores one sequence: no --chunks, --save-logits or --kl-divergence"));
    EngineConfig cfg;
    cfg.model_path = model_path;
    cfg.n_threads = n_threads;
    auto be_kind = parse_backend_flag(backend_name);
    if (!be_kind) return report(be_kind.status());
    cfg.backend = *be_kind;
    cfg.kv_type = *kv;
    cfg.n_ctx = n_ctx_flag;  // 0: the model's
    auto gguf = hf::open_model_file(model_path);
    if (!gguf) return report(gguf.status());
    auto vocab = Tokenizer::from_gguf(*gguf);
    if (!vocab) return report(vocab.status().with_context(model_path));
    const std::vector<TokenId> tokens = (*vocab)->encode(*text, true, false);
    if (auto st = run_continuous(co, cfg, tokens); !st) return report(st);
    return 0;
  }
  auto be = make_backend_from_flag(backend_name, n_threads);
  if (!be) return report(be.status());
  auto model = Model::load(model_path, *be);
  if (!model) return report(model.status());
  auto tok = Tokenizer::from_gguf((*model)->file());
  if (!tok) return report(tok.status().with_context(model_path));
  warn_past_training_context((*model)->hparams(), n_ctx);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenId> tokens = (*tok)->encode(*text, true, false);
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.max_windows = n_chunks;
  o.add_bos = (*tok)->add_bos();
  o.bos = (*tok)->bos_id();
  o.kv_type = *kv;
  const bool tty = isatty(STDERR_FILENO);
  auto on_window = [&](int w, double ppl) {
    if (tty) std::fprintf(stderr, "\rwindow %d: perplexity %.4f", w + 1, ppl);
  };
  Result<PerplexityResult> res = error(ErrorKind::Internal, "unset");
  std::optional<eval::KlSummary> kl;
  if (save_logits.empty() && kl_base.empty()) {
    res = compute_perplexity(**model, tokens, o, on_window);
  } else {
    auto pass = run_logits_pass(**model, tokens, {o, save_logits, kl_base}, on_window);
    if (pass) {
      res = PerplexityResult{pass->perplexity, pass->nll_mean, pass->n_scored, pass->n_windows};
      kl = pass->kl;
    } else {
      res = pass.status();
    }
  }
  if (tty) std::fputc('\n', stderr);
  if (!res) return report(res.status());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::printf("{\"perplexity\": %.6f, \"tokens\": %lld, \"windows\": %d", res->perplexity,
                static_cast<long long>(res->n_scored), res->n_windows);
    if (kl)
      std::printf(", \"kl_mean\": %.8f, \"kl_median\": %.8f, \"kl_p99\": %.8f, \"kl_max\": %.8f, "
                  "\"top1_agreement\": %.6f, \"ppl_base\": %.6f, \"ppl_ratio\": %.8f",
                  kl->kl_mean, kl->kl_median, kl->kl_p99, kl->kl_max, kl->top1_agreement, kl->ppl_base, kl->ppl_ratio);
    std::printf("}\n");
  } else {
    std::printf("perplexity: %.4f (%lld tokens scored in %d windows of %d)\n", res->perplexity,
                static_cast<long long>(res->n_scored), res->n_windows, n_ctx);
    if (kl) print_kl_summary(*kl);
  }
  if (!save_logits.empty()) std::fprintf(stderr, "tern: saved the scored distributions to %s\n", save_logits.c_str());
  std::fprintf(stderr, "tern: %zu tokens in the text, %.1f s, %.1f tok/s evaluated\n", tokens.size(), s,
               res->n_windows * static_cast<double>(n_ctx) / s);
  return 0;
}

}  // namespace tern::cli
