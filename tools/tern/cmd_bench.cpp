// tern bench -m MODEL [-p 512] [-n 128] [-d DEPTHS] [-b BATCHES] [-t THREADS] [-r REPS] [--kv-type f16|f32]
//            [--json] [--price-per-hour P]
// (and `tern bench serve|sweep`, the serving load generator in cmd_bench_serve.cpp)
// Prompt processing, generation and batched decode throughput, each beside
// the machine's measured limits (roofline).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "args.h"
#include "backend_flag.h"
#include "bench_tune.h"
#include "commands.h"
#include "core/build_info.h"
#include "core/kv_format.h"
#include "engine/bench.h"
#include "kernels/cpu_features.h"
#include "kernels/roofline.h"
#include "kernels/tuning.h"

namespace tern::cli {
namespace {


// The weight type holding most of the model's bytes, e.g. "Q4_K".
std::string dominant_type(const Model& m) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : m.file().tensors()) bytes[std::string(gguf::type_name(t.type))] += t.n_bytes;
  std::string best;
  uint64_t most = 0;
  for (const auto& [name, b] : bytes)
    if (b > most) most = b, best = name;
  return best;
}

bool is_float_type(const std::string& t) { return t == "F32" || t == "F16" || t == "BF16"; }

// Tokens routed to each expert over the whole run (summed over layers), and
// the smallest and largest share of them: with random weights about 1/n each;
// a trained model's imbalance shows here.
struct MoeShares {
  std::vector<uint64_t> tokens;  // [n_expert]; empty for dense models
  double min_share = 0, max_share = 0;
  int min_expert = 0, max_expert = 0;
};

MoeShares moe_shares(const Model& m) {
  MoeShares s;
  const auto counts = m.expert_tokens();
  s.tokens.assign(counts.begin(), counts.end());
  uint64_t total = 0;
  for (uint64_t c : s.tokens) total += c;
  if (s.tokens.empty() || total == 0) return s;
  for (size_t e = 0; e < s.tokens.size(); ++e) {
    if (s.tokens[e] < s.tokens[static_cast<size_t>(s.min_expert)]) s.min_expert = static_cast<int>(e);
    if (s.tokens[e] > s.tokens[static_cast<size_t>(s.max_expert)]) s.max_expert = static_cast<int>(e);
  }
  s.min_share = static_cast<double>(s.tokens[static_cast<size_t>(s.min_expert)]) / static_cast<double>(total);
  s.max_share = static_cast<double>(s.tokens[static_cast<size_t>(s.max_expert)]) / static_cast<double>(total);
  return s;
}

void print_moe(const Model& m, const MoeShares& s) {
  const HParams& hp = m.hparams();
  std::printf("experts   %d, %d per token: %.2f of %.2f GB of weights read per token (active / total)\n", hp.n_expert,
              hp.n_expert_used, m.active_weight_bytes() / 1e9, m.weight_bytes() / 1e9);
  std::printf("          tokens per expert over the run, summed over layers (uniform share %.2f%%):\n",
              100.0 / hp.n_expert);
  std::string line;  // 8 experts a line, no trailing blanks
  for (size_t e = 0; e < s.tokens.size(); ++e) {
    char cell[48];
    std::snprintf(cell, sizeof cell, "%3zu:%-9llu", e, static_cast<unsigned long long>(s.tokens[e]));
    line += (e % 8 == 0 ? "          " : " ") + std::string(cell);
    if (e % 8 == 7 || e + 1 == s.tokens.size()) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::printf("%s\n", line.c_str());
      line.clear();
    }
  }
  std::printf("          min share %.2f%% (expert %d), max share %.2f%% (expert %d)\n", 100.0 * s.min_share,
              s.min_expert, 100.0 * s.max_share, s.max_expert);
}

// "1,4,8": integers in [lo, hi], or an error naming the flag and what it lists.
Result<std::vector<int>> parse_int_list(const std::string& text, long lo, long hi, const char* flag, const char* what) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || v < lo || v > hi)
      return error(ErrorKind::InvalidArgument, std::string("bench: ") + flag + " expects a comma-separated list of " +
                                                   what + " in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                                   "], got '" + text + "'");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// --tune's findings: every candidate's pp per round, the choice, the record.
void print_tune(const TuneResult& t, const BenchOptions& o, bool json) {
  std::string types;
  for (gguf::GgmlType ty : t.types) types += (types.empty() ? "" : " ") + std::string(gguf::type_name(ty));
  if (json) {
    std::printf("{\"tune\": {\"path\": \"%s\", \"level\": \"%s\", \"types\": \"%s\", \"n_prompt\": %d, "
                "\"best_act_block_bytes\": %zu, \"candidates\": [",
                t.path.c_str(), kernels::cpu_level_name(t.level), types.c_str(), o.n_prompt, t.best_bytes);
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      const TuneCandidate& c = t.candidates[i];
      std::printf("%s{\"act_block_bytes\": %zu, \"pp_tok_s\": [", i ? ", " : "", c.act_block_bytes);
      for (size_t r = 0; r < c.pp_tok_s.size(); ++r) std::printf("%s%.3f", r ? ", " : "", c.pp_tok_s[r]);
      std::printf("], \"mean\": %.3f}", c.mean);
    }
    std::printf("]}}\n");
    return;
  }
  std::printf("tuning    kernels %s, weight types %s, pp%d per candidate, %zu rounds interleaved\n\n",
              kernels::cpu_level_name(t.level), types.c_str(), o.n_prompt,
              t.candidates.empty() ? size_t{0} : t.candidates[0].pp_tok_s.size());
  std::printf("%-16s %12s   %s\n", "act block", "pp tok/s", "per round");
  for (const TuneCandidate& c : t.candidates) {
    std::string rounds;
    for (double v : c.pp_tok_s) rounds += (rounds.empty() ? "" : " ") + std::to_string(static_cast<int>(v + 0.5));
    const std::string name = c.act_block_bytes ? std::to_string(c.act_block_bytes >> 10) + " KiB" : "defaults";
    std::printf("%-16s %12.2f   %s%s\n", name.c_str(), c.mean, rounds.c_str(),
                c.act_block_bytes == t.best_bytes ? "   <- chosen" : "");
  }
  std::printf("\n%s; wrote %s\n",
              t.best_bytes ? "recorded the best" : "nothing beat the defaults by 3%: they stay", t.path.c_str());
}

// -d 0,512,4096: cached positions before pp and tg (llama-bench's -d).
Result<std::vector<int>> parse_depth_list(const std::string& text) { return parse_int_list(text, 0, 1 << 22, "-d", "depths"); }

}  // namespace

Result<std::vector<int>> parse_batch_list(const std::string& text) {
  return parse_int_list(text, 1, 4096, "-b", "batch sizes");
}

int cmd_bench(int argc, char** argv) {
  std::string backend_name = "cpu";
  // `tern bench serve|sweep ...`: the serving load generator (cmd_bench_serve.cpp).
  if (argc >= 1 && std::string(argv[0]) == "serve") return cmd_bench_serve(argc - 1, argv + 1);
  if (argc >= 1 && std::string(argv[0]) == "sweep") return cmd_bench_sweep(argc - 1, argv + 1);
  for (int i = 0; i < argc; ++i)  // with a proposer: speculative decoding's speed-up (cmd_bench_spec.cpp)
    if (std::string(argv[i]) == "--draft" || std::string(argv[i]).rfind("--draft=", 0) == 0) return cmd_bench_spec(argc, argv);
  std::string model_path, batches_text, depths_text, kv_type = "f16";
  int n_threads = 0;
  bool json = false, tune = false;
  int tune_rounds = 2;
  float price_per_hour = 0.0f;
  BenchOptions o;
  ArgParser args("bench", "tern bench -m MODEL [-p 512] [-n 128] [-d DEPTHS] [-b BATCHES] [-t THREADS] [-r REPS] "
                          "[--kv-type f16|f32] [--json] [--price-per-hour P]\n       tern bench -m MODEL --draft ngram|DRAFT.gguf|self:TYPE ... (speculative decoding; see --draft --help)\n"
                          "       tern bench serve|sweep --url URL ... (see tern bench serve --help)");
  args.add("-m,--model", &model_path, "GGUF model file");
  args.add("-p,--n-prompt", &o.n_prompt, "prompt tokens for pp (default 512, 0 skips)");
  args.add("-n,--n-gen", &o.n_gen, "generated tokens for tg (default 128, 0 skips)");
  args.add("-d,--depths", &depths_text,
           "pp and tg again after this many cached positions, e.g. 0,512,4096 (as llama-bench -d; default 0)");
  args.add("--kv-type", &kv_type, "KV cache encoding: f16 (default, as the engine), f32, q8_0, q4_0 or fp8");
  args.add("-b,--batches", &batches_text, "batched decode sizes, e.g. 2,4,8 (default none)");
  args.add("-t,--threads", &n_threads, "threads (default: all cores)");
  args.add("--backend", &backend_name, kBackendHelp);
  args.add("-r,--repetitions", &o.repetitions, "measured repetitions after one warm-up (default 5)");
  args.add_flag("--json", &json, "print one JSON object");
  args.add("--price-per-hour", &price_per_hour, "machine price per hour: adds the cost per million generated tokens");
  args.add_flag("--tune", &tune,
                "measure pp under each activation block size and write the best as this CPU's tuning record "
                "($TERN_TUNING, else ~/.cache/tern/tuning), which the kernels read at start");
  args.add("--tune-rounds", &tune_rounds, "interleaved rounds over the candidates for --tune (default 2)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (tune_rounds < 1 || tune_rounds > 20)
    return report(error(ErrorKind::InvalidArgument, "bench: --tune-rounds must be in [1, 20]"));
  if (!(price_per_hour >= 0.0f)) return report(error(ErrorKind::InvalidArgument, "bench: --price-per-hour must be >= 0"));
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (model_path.empty()) return report(error(ErrorKind::InvalidArgument, "bench: -m MODEL is required"));
  if (n_threads < 0) return report(error(ErrorKind::InvalidArgument, "bench: -t must be >= 1"));
  if (!batches_text.empty()) {
    auto list = parse_batch_list(batches_text);
    if (!list) return report(list.status());
    o.batches = *list;
  }
  if (!depths_text.empty()) {
    auto list = parse_depth_list(depths_text);
    if (!list) return report(list.status());
    o.depths = *list;
  }
  const std::optional<KvType> kv = parse_kv_type(kv_type);
  if (!kv)
    return report(error(ErrorKind::InvalidArgument, "bench: --kv-type '" + kv_type + "': expected " + kv_type_choices()));
  o.kv_type = *kv;
  auto be = make_backend_from_flag(backend_name, n_threads);
  if (!be) return report(be.status());
  auto model = Model::load(model_path, *be);
  if (!model) return report(model.status());
  const Model& m = **model;
  // The machine's limits are measured on as many threads as the backend runs.
  ThreadPool pool(m.backend().n_threads());
  const bool tty = isatty(STDERR_FILENO);
  auto status_line = [&](const std::string& what) {
    if (tty) std::fprintf(stderr, "\r\033[Kbench: %s ...", what.c_str());
  };

  if (tune) {
    if (backend_name != "cpu")
      return report(error(ErrorKind::InvalidArgument, "bench --tune: tunes the cpu backend's kernels (--backend cpu)"));
    auto t = run_bench_tune(m, o, tune_rounds, status_line);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!t) return report(t.status());
    print_tune(*t, o, json);
    return 0;
  }
  status_line("measuring machine limits");
  const kernels::MachineLimits lim = kernels::measure_machine_limits(pool);
  auto res = run_bench(m, o, status_line);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!res) return report(res.status());
  auto hash = hash_file(model_path);

  const BenchResult& r = *res;
  // Decode reads the matrices a token uses: for MoE models its k experts, not all of them.
  const double weight_gb = m.active_weight_bytes() / 1e9;
  const MoeShares moe = moe_shares(m);
  const double bandwidth_gbs = weight_gb * r.tg.tok_s;
  const double gflops = r.flops_per_token_pp * r.pp.tok_s / 1e9;
  const std::string wtype = dominant_type(m);
  const double compute_peak = is_float_type(wtype) ? lim.peak_gflops_f32 : lim.peak_gops_int8;
  const double roofline_tg = lim.read_bw_gbs > 0 ? lim.read_bw_gbs / weight_gb : 0.0;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(model_path, ec);
  const int64_t file_bytes = ec ? 0 : static_cast<int64_t>(size);  // 0 for a Hugging Face directory
  const double mib = 1024.0 * 1024.0;
  const double other_mib = (static_cast<double>(r.rss_bytes) - file_bytes - r.kv_bytes) / mib;
  char hash_hex[20];
  std::snprintf(hash_hex, sizeof hash_hex, "%016llx", hash ? static_cast<unsigned long long>(*hash) : 0ull);
  const kernels::CpuLevel level = kernels::best_cpu_level();
  // Cost figures: tokens/s per core (the threads used), and with a price, what
  // a million generated tokens cost at that rate.
  const double n_cores = pool.n_threads();
  auto cost_per_million = [&](double tok_s) { return tok_s > 0 ? price_per_hour / 3600.0 / tok_s * 1e6 : 0.0; };
  // At depth a tg token reads the weights and the KV cache: GB per token, and the tok/s that allows.
  auto tg_read_gb = [&](const DepthThroughput& d) { return weight_gb + d.tg_kv_bytes / 1e9; };
  auto roofline_at = [&](const DepthThroughput& d) { return lim.read_bw_gbs > 0 ? lim.read_bw_gbs / tg_read_gb(d) : 0.0; };

  if (json) {
    std::printf("{\"pp\": {\"tokens\": %d, \"tok_s\": %.3f, \"std\": %.3f, \"tok_s_per_core\": %.3f}, ", r.pp.tokens,
                r.pp.tok_s, r.pp.std, r.pp.tok_s / n_cores);
    std::printf("\"tg\": {\"tokens\": %d, \"tok_s\": %.3f, \"std\": %.3f, \"tok_s_per_core\": %.3f", r.tg.tokens,
                r.tg.tok_s, r.tg.std, r.tg.tok_s / n_cores);
    if (price_per_hour > 0) std::printf(", \"cost_per_million_tokens\": %.4f", cost_per_million(r.tg.tok_s));
    std::printf("}, \"batched\": [");
    for (size_t i = 0; i < r.batched.size(); ++i) {
      std::printf("%s{\"batch\": %d, \"tok_s\": %.3f, \"std\": %.3f, \"tok_s_per_core\": %.3f", i ? ", " : "",
                  r.batched[i].batch, r.batched[i].tok_s, r.batched[i].std, r.batched[i].tok_s / n_cores);
      if (price_per_hour > 0) std::printf(", \"cost_per_million_tokens\": %.4f", cost_per_million(r.batched[i].tok_s));
      std::printf("}");
    }
    if (price_per_hour > 0) std::printf("], \"price_per_hour\": %.4f, \"cores\": %d, ", price_per_hour, pool.n_threads());
    else std::printf("], \"cores\": %d, ", pool.n_threads());
    std::printf("\"bandwidth_gbs\": %.3f, \"gflops\": %.3f, ", bandwidth_gbs, gflops);
    std::printf("\"limits\": {\"read_bw_gbs\": %.3f, \"peak_gflops_f32\": %.1f, \"peak_gops_int8\": %.1f}, ",
                lim.read_bw_gbs, lim.peak_gflops_f32, lim.peak_gops_int8);
    std::printf("\"roofline_tg_tok_s\": %.3f, \"weight_bytes\": %llu, \"weight_type\": \"%s\", ", roofline_tg,
                static_cast<unsigned long long>(m.weight_bytes()), wtype.c_str());
    std::printf("\"model\": \"%s\", \"model_hash\": \"%s\", \"threads\": %d, \"cpu_level\": \"%s\", ", model_path.c_str(),
                hash_hex, pool.n_threads(), kernels::cpu_level_name(level));
    std::printf("\"rss_bytes\": %lld, \"kv_bytes\": %lld, \"file_bytes\": %lld, \"rss_other_mib\": %.1f, ",
                static_cast<long long>(r.rss_bytes), static_cast<long long>(r.kv_bytes),
                static_cast<long long>(file_bytes), other_mib);
    if (!moe.tokens.empty()) {
      std::printf("\"moe\": {\"experts\": %d, \"experts_used\": %d, \"total_weight_bytes\": %llu, "
                  "\"active_weight_bytes\": %llu, \"min_share\": %.4f, \"max_share\": %.4f, \"expert_tokens\": [",
                  m.hparams().n_expert, m.hparams().n_expert_used, static_cast<unsigned long long>(m.weight_bytes()),
                  static_cast<unsigned long long>(m.active_weight_bytes()), moe.min_share, moe.max_share);
      for (size_t e = 0; e < moe.tokens.size(); ++e)
        std::printf("%s%llu", e ? ", " : "", static_cast<unsigned long long>(moe.tokens[e]));
      std::printf("]}, ");
    }
    // Per depth: tg's roofline counts the KV bytes a token reads as well as the weights.
    std::printf("\"kv_type\": \"%s\", \"depths\": [", kv_type.c_str());
    for (size_t i = 0; i < r.depths.size(); ++i) {
      const DepthThroughput& d = r.depths[i];
      std::printf("%s{\"depth\": %d, \"pp\": {\"tokens\": %d, \"tok_s\": %.3f, \"std\": %.3f}, "
                  "\"tg\": {\"tokens\": %d, \"tok_s\": %.3f, \"std\": %.3f}, \"kv_bytes_per_token\": %.0f, "
                  "\"bandwidth_gbs\": %.3f, \"roofline_tg_tok_s\": %.3f}",
                  i ? ", " : "", d.depth, d.pp.tokens, d.pp.tok_s, d.pp.std, d.tg.tokens, d.tg.tok_s, d.tg.std,
                  d.tg_kv_bytes, tg_read_gb(d) * d.tg.tok_s, roofline_at(d));
    }
    std::printf("], ");
    std::printf("\"tuning\": \"%s\", ", kernels::active_tuning().source.c_str());
    std::printf("\"cpu_flags\": \"%s\", \"git_sha\": \"%s\", \"compiler\": \"%s\"}\n",
                kernels::cpu_features().describe().c_str(), build_git_sha(), build_compiler());
    return 0;
  }
  const HParams& hp = m.hparams();
  std::printf("model     %s (hash %s)\n          %s, %.1f M params in matrices, %.2f GB of weights per token, mostly %s\n",
              model_path.c_str(), hash_hex, hp.arch.c_str(), model_flops_per_token(m, 0) / 2e6, weight_gb, wtype.c_str());
  std::printf("machine   %d threads, kernels %s (%s)\n", pool.n_threads(), kernels::cpu_level_name(level),
              kernels::cpu_features().describe().c_str());
  std::printf("limits    read %.1f GB/s | f32 FMA %.0f GFLOP/s | int8 dot %.0f GOP/s\n", lim.read_bw_gbs,
              lim.peak_gflops_f32, lim.peak_gops_int8);
  std::printf("build     %s, %s\n", build_git_sha(), build_compiler());
  const std::string& tuning = kernels::active_tuning().source;
  std::printf("tuning    %s\n", tuning.empty() ? "built-in defaults (no record for this CPU: tern bench --tune)" : tuning.c_str());
  if (r.rss_bytes > 0)
    std::printf("memory    RSS %.1f MiB = file %.1f + KV %.1f + %.1f MiB other (after pp/tg)\n", r.rss_bytes / mib,
                file_bytes / mib, r.kv_bytes / mib, other_mib);
  if (!moe.tokens.empty()) print_moe(m, moe);
  std::printf("\n");
  std::printf("%-14s %18s %10s   %s\n", "test", "tok/s", "per core", "roofline");
  if (o.depths.empty()) {
    if (r.pp.tokens > 0)
      std::printf("%-14s %10.2f ± %-6.2f %10.2f   %.1f GFLOP/s = %.0f%% of the %s peak\n",
                  ("pp" + std::to_string(r.pp.tokens)).c_str(), r.pp.tok_s, r.pp.std, r.pp.tok_s / n_cores, gflops,
                  compute_peak > 0 ? 100.0 * gflops / compute_peak : 0.0, is_float_type(wtype) ? "f32" : "int8");
    if (r.tg.tokens > 0)
      std::printf("%-14s %10.2f ± %-6.2f %10.2f   %.1f GB/s of weights = %.0f%% of read bandwidth (roofline %.1f tok/s)\n",
                  ("tg" + std::to_string(r.tg.tokens)).c_str(), r.tg.tok_s, r.tg.std, r.tg.tok_s / n_cores,
                  bandwidth_gbs, lim.read_bw_gbs > 0 ? 100.0 * bandwidth_gbs / lim.read_bw_gbs : 0.0, roofline_tg);
  }
  // With -d: each depth's pp (its flops count attention over the cached
  // positions too) and tg beside the roofline of the weights plus the KV it reads.
  if (!o.depths.empty())
    for (const DepthThroughput& d : r.depths) {
      const std::string at = " @ d" + std::to_string(d.depth);
      if (d.pp.tokens > 0) {
        const double g = model_flops_per_token(m, d.depth + d.pp.tokens / 2.0) * d.pp.tok_s / 1e9;
        std::printf("%-14s %10.2f ± %-6.2f %10.2f   %.1f GFLOP/s = %.0f%% of the %s peak\n",
                    ("pp" + std::to_string(d.pp.tokens) + at).c_str(), d.pp.tok_s, d.pp.std, d.pp.tok_s / n_cores, g,
                    compute_peak > 0 ? 100.0 * g / compute_peak : 0.0, is_float_type(wtype) ? "f32" : "int8");
      }
      if (d.tg.tokens > 0) {
        const double gbs = tg_read_gb(d) * d.tg.tok_s;
        std::printf("%-14s %10.2f ± %-6.2f %10.2f   %.1f GB/s of weights+KV (KV %.1f MB/token) = %.0f%% of read "
                    "bandwidth (roofline %.1f tok/s)\n",
                    ("tg" + std::to_string(d.tg.tokens) + at).c_str(), d.tg.tok_s, d.tg.std, d.tg.tok_s / n_cores, gbs,
                    d.tg_kv_bytes / 1e6, lim.read_bw_gbs > 0 ? 100.0 * gbs / lim.read_bw_gbs : 0.0, roofline_at(d));
      }
    }
  for (const auto& b : r.batched)
    std::printf("%-14s %10.2f ± %-6.2f %10.2f   %d steps\n", ("batched b=" + std::to_string(b.batch)).c_str(), b.tok_s,
                b.std, b.tok_s / n_cores, b.steps);
  if (price_per_hour > 0) {
    std::printf("\ncost at %.4f per hour: %.4f per million generated tokens (tg)", price_per_hour,
                cost_per_million(r.tg.tok_s));
    for (const auto& b : r.batched) std::printf(", %.4f at batch %d", cost_per_million(b.tok_s), b.batch);
    std::printf("\n");
  }
  return 0;
}

}  // namespace tern::cli
