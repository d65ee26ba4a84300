// tern bench -m MODEL --draft ngram|DRAFT.gguf|self:TYPE [--spec-k K] [--spec-tree W] [-n 128] [-b 1,4,16] [-r 3] [-t THREADS]
//            [-p PROMPT] [--json]
// Greedy generation through the serving engine without and with speculative
// decoding, interleaved, at each batch size: tok/s of both, the speed-up,
// acceptance, mean accepted length and the proposer's share of the time.
#include <unistd.h>

#include <cstdio>

#include "args.h"
#include "backend_flag.h"
#include "commands.h"
#include "engine/spec_bench.h"
#include "engine_flags.h"

namespace tern::cli {

int cmd_bench_spec(int argc, char** argv) {
  std::string model_path, draft, prompt, batches = "1", backend_name = "cpu";
  int spec_k = 4, spec_tree = 1, n_threads = 0;
  bool json = false;
  SpecBenchOptions o;
  ArgParser args("bench", "tern bench -m MODEL --draft ngram|DRAFT.gguf|self:TYPE [--spec-k K] [--spec-tree W] [-n 128] [-b 1,4,16] "
                          "[-r 3] [-t THREADS] [-p PROMPT] [--json]");
  args.add("-m,--model", &model_path, "GGUF model file (the target)");
  args.add("--draft", &draft, EngineFlags::kDraftHelp);
  args.add("--spec-k", &spec_k, EngineFlags::kSpecKHelp);
  args.add("--spec-tree", &spec_tree, EngineFlags::kSpecTreeHelp);
  args.add("-n,--n-gen", &o.n_gen, "tokens generated per sequence (default 128)");
  args.add("-b,--batches", &batches, "sequences at once, e.g. 1,4,16 (default 1)");
  args.add("-r,--repetitions", &o.repetitions, "measured repetitions after one warm-up (default 3)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add("--backend", &backend_name, kBackendHelp);
  args.add("-p,--prompt", &prompt, "one prompt for every sequence (default: a few story openings, cycled)");
  args.add_flag("--json", &json, "print one JSON object");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model_path.empty() || draft.empty())
    return report(error(ErrorKind::InvalidArgument, "bench: -m MODEL and --draft are required"));
  auto list = parse_batch_list(batches);
  if (!list) return report(list.status());
  o.batches = *list;
  EngineConfig plain;
  plain.model_path = model_path;
  plain.n_threads = n_threads;
  auto be = parse_backend_flag(backend_name);
  if (!be) return report(be.status());
  plain.backend = *be;
  for (int b : o.batches) plain.max_num_seqs = std::max(plain.max_num_seqs, b);
  plain.max_batched_tokens = std::max(512, plain.max_num_seqs * 17);  // every sequence with 16 proposals fits a step
  EngineConfig spec = plain;
  if (auto s = apply_spec_flags(draft, spec_k, spec_tree, spec); !s) return report(s);
  spec.max_batched_tokens = std::max(plain.max_batched_tokens, plain.max_num_seqs * (1 + spec_k * spec_tree));
  const std::vector<std::string> prompts =
      prompt.empty() ? std::vector<std::string>{"Once upon a time", "One day, a little girl", "Tom and his dog",
                                                "The sun was shining", "There was a big tree"}
                     : std::vector<std::string>{prompt};
  const bool tty = isatty(STDERR_FILENO);
  auto rows = bench_speculative(plain, spec, prompts, o, [&](const std::string& what) {
    if (tty) std::fprintf(stderr, "\r\033[Kbench: %s ...", what.c_str());
  });
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!rows) return report(rows.status());
  if (json) {
    std::printf("{\"model\": \"%s\", \"draft\": \"%s\", \"spec_k\": %d, \"n_gen\": %d, \"rows\": [", model_path.c_str(),
                draft.c_str(), spec_k, o.n_gen);
    for (size_t i = 0; i < rows->size(); ++i) {
      const SpecBenchRow& r = (*rows)[i];
      std::printf("%s{\"batch\": %d, \"plain_tok_s\": %.3f, \"plain_std\": %.3f, \"spec_tok_s\": %.3f, \"spec_std\": %.3f, "
                  "\"speedup\": %.3f, \"proposed\": %lld, \"accepted\": %lld, \"verifies\": %lld, \"draft_share\": %.4f, "
                  "\"same_output\": %s}",
                  i ? ", " : "", r.batch, r.plain_tok_s, r.plain_std, r.spec_tok_s, r.spec_std,
                  r.plain_tok_s > 0 ? r.spec_tok_s / r.plain_tok_s : 0.0, static_cast<long long>(r.proposed),
                  static_cast<long long>(r.accepted), static_cast<long long>(r.verifies), r.draft_share,
                  r.same_output ? "true" : "false");
    }
    std::printf("]}\n");
  } else {
    std::printf("model %s, draft %s, k <= %d, %d greedy tokens per sequence\n\n", model_path.c_str(), draft.c_str(),
                spec_k, o.n_gen);
    std::printf("%6s %20s %20s %8s %9s %12s %7s %6s\n", "batch", "plain tok/s", "spec tok/s", "speedup", "accepted",
                "mean length", "draft", "same");
    for (const SpecBenchRow& r : *rows)
      std::printf("%6d %11.2f ± %-6.2f %11.2f ± %-6.2f %7.2fx %8.1f%% %12.2f %6.1f%% %6s\n", r.batch, r.plain_tok_s,
                  r.plain_std, r.spec_tok_s, r.spec_std, r.plain_tok_s > 0 ? r.spec_tok_s / r.plain_tok_s : 0.0,
                  r.proposed > 0 ? 100.0 * static_cast<double>(r.accepted) / static_cast<double>(r.proposed) : 0.0,
                  r.verifies > 0 ? static_cast<double>(r.accepted) / static_cast<double>(r.verifies) : 0.0,
                  100.0 * r.draft_share, r.same_output ? "yes" : "NO");
  }
  for (const SpecBenchRow& r : *rows)
    if (!r.same_output) {
      std::fprintf(stderr, "bench: greedy output differed with speculation at batch %d\n", r.batch);
      return 1;
    }
  return 0;
}

}  // namespace tern::cli
