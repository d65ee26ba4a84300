// tern run -m MODEL -p PROMPT [...] — stream a continuation to stdout.
// Only generated text goes to stdout; timings go to stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "args.h"
#include "backend_flag.h"
#include "commands.h"
#include "core/format_bytes.h"
#include "core/input_file.h"
#include "core/memory_info.h"
#include "core/mmap.h"
#include "backend/backend.h"
#include "engine/generate.h"
#include "engine/streaming.h"
#include "engine_flags.h"
#include "output.h"

namespace tern::cli {
namespace {

// --cold: the model file out of the page cache, and how much of it was (and is) there.
Status start_cold(const std::string& path) {
  auto before = page_cache_share(path);
  if (!before) return before.status().with_context("run: --cold takes a model file");
  TERN_RETURN_IF_ERROR(drop_from_page_cache(path));
  auto after = page_cache_share(path);
  if (!after) return after.status();
  std::fprintf(stderr, "tern: cold start: %.1f%% of the model file was in the page cache, %.1f%% after dropping it\n",
               100.0 * *before, 100.0 * *after);
  return Status::ok();
}

}  // namespace


int cmd_run(int argc, char** argv) {
  std::string model_path, prompt, prompt_file, stop, backend_name = "cpu", draft, grammar_file, schema_file, regex;
  std::string streaming = "off", kv_evict = "off";
  int n_predict = 128, n_threads = 0, n_ctx = 0, spec_k = 4, spec_tree = 1;
  bool echo = false, ignore_eos = false, have_seed = false, json_object = false;
  uint64_t seed = 0;
  SamplingParams sp;
  ArgParser args("run", "tern run -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] "
                        "[--seed S] [-t THREADS] [--draft ngram [--spec-k K] [--spec-tree W]] [--echo] "
                        "[--grammar-file F | --json-schema-file F | --regex R | --json] [--streaming SINKS,WINDOW | shift[:SINKS]] [--kv-evict h2o:B,R | snapkv:B,W] "
                        "[--max-rss BYTES] [--mlock] [--no-mmap] [--cold]");
  args.add("-m,--model", &model_path, "GGUF model file");
  args.add("-p,--prompt", &prompt, "prompt text (empty = BOS only)");
  args.add("-f,--file", &prompt_file, "read the prompt from a file (regular file, up to 1 GiB)");
  args.add("-n,--n-predict", &n_predict, "tokens to generate (default 128)");
  args.add("--temp", &sp.temperature, "temperature; 0 = greedy (default 0.8)");
  args.add("--top-k", &sp.top_k, "top-k, <= 0 disables (default 40)");
  args.add("--top-p", &sp.top_p, "top-p, 1 disables (default 0.95)");
  args.add("--min-p", &sp.min_p, "min-p, 0 disables (default 0.05)");
  args.add("--repeat-penalty", &sp.repetition_penalty, "repetition penalty, 1 disables (default 1)");
  args.add("--frequency-penalty", &sp.frequency_penalty, "frequency penalty (default 0)");
  args.add("--presence-penalty", &sp.presence_penalty, "presence penalty (default 0)");
  args.add("--repeat-last-n", &sp.penalty_last_n, "tokens the penalties look back on (default 64, -1 = all)");
  args.add("--seed", &seed, "random seed (default: random)");
  args.add("--stop", &stop, "stop when this text is generated");
  args.add("-c,--ctx-size", &n_ctx, "context size (default: the model's)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add("--backend", &backend_name, kBackendHelp);
  args.add("--draft", &draft, EngineFlags::kDraftHelp);
  args.add("--spec-k", &spec_k, EngineFlags::kSpecKHelp);
  args.add("--spec-tree", &spec_tree, EngineFlags::kSpecTreeHelp);
  args.add_flag("--echo", &echo, "print the prompt before the continuation");
  args.add("--grammar-file", &grammar_file, "constrain the output to a GBNF grammar (llama.cpp's syntax) read from F");
  args.add("--json-schema-file", &schema_file, "constrain the output to JSON matching the JSON Schema in F");
  args.add("--regex", &regex, "constrain the output to text matching this regular expression");
  args.add_flag("--json", &json_object, "constrain the output to a JSON object");
  args.add_flag("--ignore-eos", &ignore_eos, "keep generating after end-of-text tokens");
  args.add("--streaming", &streaming, EngineFlags::kStreamingHelp);
  args.add("--kv-evict", &kv_evict, EngineFlags::kKvEvictHelp);
  MemoryFlags memory;
  memory.add_to(args);
  bool cold = false;
  args.add_flag("--cold", &cold, "drop the model file from the page cache first: load and first-token times as after a reboot");
  seed = SamplingParams{}.seed;
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  have_seed = seed != SamplingParams{}.seed;
  if (model_path.empty()) return report(error(ErrorKind::InvalidArgument, "run: -m MODEL is required"));
  if (n_predict < 0) return report(error(ErrorKind::InvalidArgument, "run: -n must be >= 0"));
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "run: -t must be >= 1"));
  if (!prompt_file.empty()) {
    auto text = read_file(prompt_file);
    if (!text) return report(text.status());
    prompt = *text;
  }
  sp.seed = have_seed ? seed : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (auto st = sp.validate(); !st) return report(st);

  if (cold) {
    if (auto st = start_cold(model_path); !st) return report(st);
  }
  // One sequence through the serving engine: the same input processor,
  // scheduler, runner and output processor as `tern batch` and `tern serve`.
  const auto t0 = std::chrono::steady_clock::now();
  EngineConfig cfg = single_sequence_config(model_path, n_ctx, n_threads);
  auto be = parse_backend_flag(backend_name);
  if (!be) return report(be.status());
  cfg.backend = *be;
  if (auto st = apply_spec_flags(draft, spec_k, spec_tree, cfg); !st) return report(st);
  auto stream = parse_streaming(streaming);
  if (!stream) return report(stream.status());
  cfg.streaming = *stream;
  auto evict = parse_kv_evict(kv_evict);
  if (!evict) return report(evict.status());
  cfg.kv_evict = *evict;
  if (auto st = memory.apply(cfg); !st) return report(st);
  auto engine = Engine::create(cfg);
  if (!engine) return report(engine.status());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::vector<TokenId> tokens = (*engine)->tokenize(prompt, true);
  if (tokens.empty()) {
    const int32_t bos = (*engine)->bos_token_id();
    if (bos < 0)
      return report(error(ErrorKind::InvalidArgument, "run: the prompt is empty and the vocabulary has no BOS token"));
    tokens.push_back(bos);
  }
  GenerateOptions o;
  o.sampling = sp;
  o.max_tokens = n_predict;
  o.ignore_eos = ignore_eos;
  if (!stop.empty()) o.stop.push_back(stop);
  if (auto st = constraint_from_flags(grammar_file, schema_file, regex, json_object, o.constraint); !st) return report(st);
  if (echo)
    if (auto st = write_stdout(prompt); !st) return report(st);
  // A failed write stops generation at once: nobody can read the rest.
  Status written;
  auto result = generate(**engine, std::move(tokens), o, [&written](const std::string& piece) {
    written = write_stdout(piece);
    return written.is_ok();
  });
  if (!written) return report(written);
  if (!result) return report(result.status());
  if (isatty(STDOUT_FILENO)) std::fputc('\n', stderr);
  const GenerateResult& r = *result;
  const double n_gen = static_cast<double>(r.tokens.size());
  std::fprintf(stderr, "tern: load %.1f ms | prompt %d tokens in %.1f ms (%.1f tok/s) | generation %zu tokens in %.1f ms "
                       "(%.1f tok/s) | threads %d | finish %s\n",
               load_ms, r.n_prompt, r.prompt_ms, r.prompt_ms > 0 ? r.n_prompt * 1000.0 / r.prompt_ms : 0.0,
               r.tokens.size(), r.generate_ms, r.generate_ms > 0 ? (n_gen - 1) * 1000.0 / r.generate_ms : 0.0,
               (*engine)->n_threads(), finish_reason_name(r.finish));
  std::fprintf(stderr, "tern: first token %.1f ms after the start of loading | peak resident memory %s\n",
               load_ms + r.prompt_ms, format_bytes(static_cast<uint64_t>(peak_resident_bytes())).c_str());
  if (cfg.spec != SpecMethod::None) {
    const EngineStats st = (*engine)->stats();
    std::fprintf(stderr, "tern: speculative (%s, k <= %d): %lld proposed, %lld accepted (%.1f%%)\n", draft.c_str(),
                 cfg.spec_k, static_cast<long long>(st.spec_proposed), static_cast<long long>(st.spec_accepted),
                 st.spec_proposed > 0 ? 100.0 * static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_proposed)
                                      : 0.0);
  }
  return 0;
}

}  // namespace tern::cli
