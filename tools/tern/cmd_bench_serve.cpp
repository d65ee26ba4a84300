// tern bench serve / tern bench sweep — the serving load generator: streams
// requests from a dataset to an OpenAI-compatible server at a given arrival
// rate and concurrency and reports TTFT, TPOT, ITL, e2e latency, throughput,
// goodput and cost (docs/bench_serve.md). `sweep` repeats that over a list of
// rates or concurrencies and draws the latency–throughput curve.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <thread>

#include "args.h"
#include "commands.h"
#include "fd_limit.h"
#include "core/atomic_file.h"
#include "core/build_info.h"
#include "eval/svg_chart.h"
#include "loadgen/report.h"
#include "loadgen/token_counter.h"

extern char** environ;

namespace tern::cli {
namespace {

using namespace tern::loadgen;
using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxRequests = 1000000;

// Flags shared by serve and sweep.
struct CommonFlags {
  std::string url, model, dataset, tokenizer, api_key, rate_text = "inf";
  int num_requests = 0, max_concurrency = 0, warmup = 0, repeat = 1, output_len = 0, server_cores = 0;
  uint64_t seed = 0;
  float burstiness = 1.0f, slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0, timeout_s = 300, max_duration_s = 3600;
  float price_per_hour = -1;
  bool chat = false, ignore_eos = false;

  void add_to(ArgParser& args) {
    args.add("--url", &url, "server base URL, plain http only (e.g. http://127.0.0.1:8080)");
    args.add("--model", &model, "model name to send (default: the first id of GET /v1/models)");
    args.add("--dataset", &dataset, "sharegpt:FILE | random:IN,OUT[,SPREAD] | prefix:SHARED,IN,OUT");
    args.add("-n,--num-requests", &num_requests, "measured requests per run");
    args.add("--max-concurrency", &max_concurrency, "most requests in flight at once (default: no cap)");
    args.add("--burstiness", &burstiness, "gamma shape of the gaps: 1 = Poisson (default), <1 burstier");
    args.add("--seed", &seed, "seed for datasets and arrivals (default 0)");
    args.add("--warmup", &warmup, "requests sent first and left out of every figure (default 0)");
    args.add("--repeat", &repeat, "measured runs; figures get mean ± std and a 95% CI (default 1)");
    args.add("--slo-ttft", &slo_ttft_ms, "goodput SLO on time to first token, ms");
    args.add("--slo-tpot", &slo_tpot_ms, "goodput SLO on time per output token, ms");
    args.add("--slo-e2e", &slo_e2e_ms, "goodput SLO on end-to-end latency, ms");
    args.add_flag("--chat", &chat, "use /v1/chat/completions (default /v1/completions)");
    args.add_flag("--ignore-eos", &ignore_eos, "send ignore_eos: true so every output is exactly max_tokens");
    args.add("--tokenizer", &tokenizer, "GGUF whose tokenizer counts prompt/reply tokens (else estimated)");
    args.add("--output-len", &output_len, "sharegpt: max_tokens for every request (default: reply length, or 128)");
    args.add("--timeout", &timeout_s, "seconds one request may take (default 300)");
    args.add("--max-duration", &max_duration_s, "seconds one run may take; the rest is cancelled (default 3600)");
    args.add("--api-key", &api_key, "send 'Authorization: Bearer KEY'");
    args.add("--server-cores", &server_cores, "cores serving, for tokens/s per core (default: this machine's)");
    args.add("--price-per-hour", &price_per_hour, "machine price per hour, for the cost per million output tokens");
  }
};

Result<double> parse_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return kInf;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(v > 0) || !std::isfinite(v))
    return error(ErrorKind::InvalidArgument, "request rate '" + text + "': expected a number > 0 or 'inf'");
  return v;
}

Result<std::vector<double>> parse_values(const std::string& text, bool rates) {
  std::vector<double> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    auto v = parse_rate(item);
    if (!v) return v.status();
    if (!rates && (!std::isfinite(*v) || *v != std::floor(*v) || *v > 100000))
      return error(ErrorKind::InvalidArgument, "--concurrencies: '" + item + "' is not a whole number in [1, 100000]");
    out.push_back(*v);
  }
  if (out.empty()) return error(ErrorKind::InvalidArgument, "the list of sweep points is empty");
  return out;
}

json number_or_inf(double v) { return std::isfinite(v) ? json(v) : json("inf"); }

// Everything a run needs, checked and built once from the flags.
struct Setup {
  RunConfig run;
  std::vector<RequestSpec> measured, warmup;
  Slo slo;
  CostConfig cost;
  int repeat = 1;
  json config;
};

Result<Setup> prepare(const CommonFlags& f, const char* who) {
  const std::string w = who;
  if (f.url.empty()) return error(ErrorKind::InvalidArgument, w + ": --url is required");
  if (f.dataset.empty()) return error(ErrorKind::InvalidArgument, w + ": --dataset is required");
  if (f.num_requests < 1 || f.num_requests > kMaxRequests)
    return error(ErrorKind::InvalidArgument, w + ": --num-requests must be in [1, 1000000]");
  if (f.max_concurrency < 0) return error(ErrorKind::InvalidArgument, w + ": --max-concurrency must be >= 0");
  if (f.warmup < 0 || f.warmup > kMaxRequests) return error(ErrorKind::InvalidArgument, w + ": --warmup must be >= 0");
  if (f.repeat < 1 || f.repeat > 1000) return error(ErrorKind::InvalidArgument, w + ": --repeat must be in [1, 1000]");
  if (!(f.burstiness > 0)) return error(ErrorKind::InvalidArgument, w + ": --burstiness must be > 0");
  if (!(f.timeout_s > 0) || !(f.max_duration_s > 0))
    return error(ErrorKind::InvalidArgument, w + ": --timeout and --max-duration must be > 0 seconds");
  if (f.output_len < 0) return error(ErrorKind::InvalidArgument, w + ": --output-len must be >= 1");
  if (f.slo_ttft_ms < 0 || f.slo_tpot_ms < 0 || f.slo_e2e_ms < 0)
    return error(ErrorKind::InvalidArgument, w + ": SLOs must be > 0 ms");
  Setup s;
  auto url = parse_http_url(f.url);
  if (!url) return url.status().with_context(w);
  auto spec = parse_dataset_spec(f.dataset);
  if (!spec) return spec.status().with_context(w);
  auto rate = parse_rate(f.rate_text);
  if (!rate) return rate.status().with_context(w);

  TokenCounter counter = estimating_counter();
  if (!f.tokenizer.empty()) {
    auto c = tokenizer_counter(f.tokenizer);
    if (!c) return c.status().with_context(w);
    counter = std::move(*c);
  }
  ShareGptOptions sg;
  if (f.output_len > 0) sg.output_len = f.output_len;
  const size_t n_total = static_cast<size_t>(f.num_requests) + static_cast<size_t>(f.warmup);
  auto ds = build_dataset(*spec, n_total, f.seed, counter, sg);
  if (!ds) return ds.status().with_context(w);
  if (ds->n_skipped > 0) {
    std::fprintf(stderr, "%s: %s; skipped records:", who, ds->description.c_str());
    for (const auto& [why, n] : ds->skipped_by_reason) std::fprintf(stderr, " %zu %s;", n, why.c_str());
    std::fprintf(stderr, "\n");
  }
  if (!counter.exact)
    std::fprintf(stderr, "%s: no --tokenizer: dataset token lengths are estimated (~4 bytes a token); "
                         "reported token counts come from the server's usage\n", who);
  s.warmup.assign(ds->requests.begin() + f.num_requests, ds->requests.end());
  ds->requests.resize(static_cast<size_t>(f.num_requests));
  s.measured = std::move(ds->requests);

  s.run.url = *url;
  s.run.api_key = f.api_key;
  s.run.chat = f.chat;
  s.run.ignore_eos = f.ignore_eos;
  s.run.arrivals = {*rate, f.burstiness, f.seed};
  s.run.max_concurrency = f.max_concurrency;
  s.run.timeout_s = f.timeout_s;
  s.run.max_duration_s = f.max_duration_s;
  s.run.model = f.model;
  if (s.run.model.empty()) {
    auto m = discover_model(*url, f.api_key, std::min<double>(f.timeout_s, 30.0));
    if (!m) return m.status().with_context(w);
    s.run.model = *m;
  }
  if (f.slo_ttft_ms > 0) s.slo.ttft_ms = f.slo_ttft_ms;
  if (f.slo_tpot_ms > 0) s.slo.tpot_ms = f.slo_tpot_ms;
  if (f.slo_e2e_ms > 0) s.slo.e2e_ms = f.slo_e2e_ms;
  s.cost.n_cores = f.server_cores > 0 ? f.server_cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (f.price_per_hour >= 0) s.cost.price_per_hour = f.price_per_hour;
  s.repeat = f.repeat;

  json& c = s.config;
  c["url"] = url->text();
  c["model"] = s.run.model;
  c["endpoint"] = f.chat ? "/v1/chat/completions" : "/v1/completions";
  c["dataset"] = ds->description;
  c["dataset_skipped"] = ds->n_skipped;
  c["token_lengths"] = counter.exact ? "tokenizer" : "estimated";
  c["num_requests"] = f.num_requests;
  c["request_rate"] = number_or_inf(*rate);
  c["burstiness"] = f.burstiness;
  c["max_concurrency"] = f.max_concurrency > 0 ? json(f.max_concurrency) : json(nullptr);
  c["seed"] = f.seed;
  c["warmup"] = f.warmup;
  c["repeat"] = f.repeat;
  c["ignore_eos"] = f.ignore_eos;
  c["timeout_s"] = f.timeout_s;
  c["max_duration_s"] = f.max_duration_s;
  c["slo"] = {{"ttft_ms", s.slo.ttft_ms ? json(*s.slo.ttft_ms) : json(nullptr)},
              {"tpot_ms", s.slo.tpot_ms ? json(*s.slo.tpot_ms) : json(nullptr)},
              {"e2e_ms", s.slo.e2e_ms ? json(*s.slo.e2e_ms) : json(nullptr)}};
  c["price_per_hour"] = s.cost.price_per_hour ? json(*s.cost.price_per_hour) : json(nullptr);
  c["git_sha"] = build_git_sha();
  c["compiler"] = build_compiler();
  return s;
}

// A one-line progress bar on stderr, only when it is a terminal.
std::function<void(size_t, size_t)> progress_bar(const std::string& what) {
  if (!isatty(STDERR_FILENO)) return {};
  return [what](size_t done, size_t total) {
    constexpr int kWidth = 30;
    const int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
    std::fprintf(stderr, "\r\033[K%s [%s%s] %zu/%zu", what.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\r\033[K");
  };
}

void run_warmup(const Setup& s) {
  if (s.warmup.empty()) return;
  RunConfig cfg = s.run;
  cfg.arrivals.rate_per_s = kInf;
  cfg.on_progress = progress_bar("warm-up");
  const RunResult r = run_requests(cfg, s.warmup);
  size_t failed = 0;
  for (const auto& q : r.requests) failed += q.call.ok() ? 0 : 1;
  if (failed) std::fprintf(stderr, "bench: %zu of %zu warm-up requests failed\n", failed, r.requests.size());
}

// `repeat` measured runs of cfg; arrivals reseeded per repeat.
std::vector<RunResult> run_repeats(const Setup& s, RunConfig cfg, const std::string& what) {
  std::vector<RunResult> runs;
  for (int k = 0; k < s.repeat; ++k) {
    cfg.arrivals.seed = s.run.arrivals.seed + static_cast<uint64_t>(k);
    cfg.on_progress = progress_bar(s.repeat > 1 ? what + " run " + std::to_string(k + 1) : what);
    runs.push_back(run_requests(cfg, s.measured));
    if (runs.back().hit_max_duration) std::fprintf(stderr, "bench: %s stopped at --max-duration\n", what.c_str());
  }
  return runs;
}

RunMetrics pool(const std::vector<RunResult>& runs, const Setup& s, std::vector<RunMetrics>* per_run) {
  std::vector<const RunResult*> ptrs;
  for (const auto& r : runs) {
    ptrs.push_back(&r);
    if (per_run) per_run->push_back(compute_metrics(r, s.slo, s.cost));
  }
  return compute_metrics(ptrs, s.slo, s.cost);
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

// SVG -> PNG with rsvg-convert or ImageMagick's convert, when present. No shell.
bool convert_to_png(const std::string& svg, const std::string& png) {
  std::vector<std::string> argv;
  if (on_path("rsvg-convert")) argv = {"rsvg-convert", "-o", png, svg};
  else if (on_path("convert")) argv = {"convert", svg, png};
  else return false;
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Per-request latencies over send time: the picture of one run.
eval::Chart requests_chart(const std::vector<RunResult>& runs) {
  eval::Chart chart;
  chart.title = "tern bench serve: latency per request";
  chart.x_label = "send time (s)";
  chart.y_label = "latency (ms)";
  chart.y_log = true;
  eval::ChartSeries ttft{"TTFT", {}, false}, e2e{"e2e", {}, false};
  for (const auto& run : runs)
    for (const auto& r : run.requests) {
      if (!r.sent || !r.call.ok()) continue;
      const double t0 = r.call.t_start;
      e2e.points.push_back({t0, (r.call.t_end - t0) * 1e3, ""});
      if (r.call.t_first_token) ttft.points.push_back({t0, (*r.call.t_first_token - t0) * 1e3, ""});
    }
  chart.series = {std::move(ttft), std::move(e2e)};
  return chart;
}

}  // namespace

int cmd_bench_serve(int argc, char** argv) {
  CommonFlags f;
  std::string json_path, csv_path, plot_path;
  ArgParser args("bench serve",
                 "tern bench serve --url http://127.0.0.1:8080 --dataset (sharegpt:FILE | random:IN,OUT[,SPREAD] | "
                 "prefix:SHARED,IN,OUT) --num-requests N [--request-rate R|inf] [--max-concurrency C] [options]");
  f.add_to(args);
  args.add("--request-rate", &f.rate_text, "requests per second, or inf = all at once (default inf)");
  args.add("--json", &json_path, "write the figures as JSON");
  args.add("--csv", &csv_path, "write one row per request");
  args.add("--plot", &plot_path, "write an SVG of per-request latencies");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  raise_fd_limit();  // thousands of concurrent streams need as many sockets
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  auto setup = prepare(f, "bench serve");
  if (!setup) return report(setup.status());
  const Setup& s = *setup;
  run_warmup(s);
  const std::vector<RunResult> runs = run_repeats(s, s.run, "bench serve");
  std::vector<RunMetrics> per_run;
  const RunMetrics pooled = pool(runs, s, &per_run);
  std::printf("tern bench serve: %s, model %s, %s\n", s.run.url.text().c_str(), s.run.model.c_str(),
              s.config["dataset"].get<std::string>().c_str());
  std::fputs(text_summary(pooled, per_run).c_str(), stdout);
  if (!json_path.empty())
    if (auto st = write_file_atomically(json_path, serve_json(pooled, per_run, s.config).dump(2) + "\n"); !st)
      return report(st);
  if (!csv_path.empty())
    if (auto st = write_file_atomically(csv_path, requests_csv(runs)); !st) return report(st);
  if (!plot_path.empty())
    if (auto st = write_file_atomically(plot_path, eval::render_svg(requests_chart(runs))); !st)
      return report(st);
  return pooled.completed > 0 ? 0 : 1;
}

int cmd_bench_sweep(int argc, char** argv) {
  CommonFlags f;
  std::string rates_text, conc_text, prefix = "bench_sweep";
  ArgParser args("bench sweep",
                 "tern bench sweep --url URL --dataset SPEC --num-requests N (--request-rates 1,2,4,inf | "
                 "--concurrencies 1,4,16) [-o PREFIX] [options]");
  f.add_to(args);
  args.add("--request-rates", &rates_text, "rates to sweep (req/s, 'inf' allowed), under --max-concurrency");
  args.add("--concurrencies", &conc_text, "concurrency caps to sweep, at --request-rate");
  args.add("--request-rate", &f.rate_text, "arrival rate while sweeping concurrencies (default inf)");
  args.add("-o,--output", &prefix, "writes PREFIX.md, PREFIX.json, PREFIX.svg (and PREFIX.png) (default bench_sweep)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  raise_fd_limit();  // thousands of concurrent streams need as many sockets
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (rates_text.empty() == conc_text.empty())
    return report(error(ErrorKind::InvalidArgument, "bench sweep: give exactly one of --request-rates and --concurrencies"));
  const bool by_rate = !rates_text.empty();
  auto values = parse_values(by_rate ? rates_text : conc_text, by_rate);
  if (!values) return report(values.status().with_context("bench sweep"));
  auto setup = prepare(f, "bench sweep");
  if (!setup) return report(setup.status());
  const Setup& s = *setup;
  run_warmup(s);
  const std::string swept = by_rate ? "request_rate" : "max_concurrency";
  std::vector<SweepPoint> points;
  for (double v : *values) {
    RunConfig cfg = s.run;
    std::string label;
    if (by_rate) {
      cfg.arrivals.rate_per_s = v;
      char buf[32];
      std::snprintf(buf, sizeof buf, "rate %g", v);
      label = buf;
    } else {
      cfg.max_concurrency = static_cast<int>(v);
      label = "conc " + std::to_string(static_cast<int>(v));
    }
    const std::vector<RunResult> runs = run_repeats(s, cfg, "bench sweep " + label);
    points.push_back({label, v, pool(runs, s, nullptr)});
    const RunMetrics& m = points.back().metrics;
    std::fprintf(stderr, "bench sweep: %s: %.2f req/s, %.1f output tok/s, TTFT p50 %.1f ms, %zu failed\n",
                 label.c_str(), m.request_throughput, m.output_throughput, m.ttft_ms.median, m.failed);
  }
  const std::string md = sweep_markdown(points, swept);
  std::fputs(md.c_str(), stdout);
  eval::Chart chart = sweep_chart(points, "tern bench sweep: latency vs throughput (" + s.run.model + ")");
  const std::string svg_path = prefix + ".svg", png_path = prefix + ".png";
  for (auto st : {write_file_atomically(prefix + ".md", md),
                  write_file_atomically(prefix + ".json", sweep_json(points, swept, s.config).dump(2) + "\n"),
                  write_file_atomically(svg_path, eval::render_svg(chart))})
    if (!st) return report(st);
  const bool png = convert_to_png(svg_path, png_path);
  std::fprintf(stderr, "bench sweep: wrote %s.md, %s.json, %s%s\n", prefix.c_str(), prefix.c_str(), svg_path.c_str(),
               png ? (", " + png_path).c_str() : " (no rsvg-convert/convert for PNG)");
  return 0;
}

}  // namespace tern::cli
