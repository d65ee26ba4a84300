#include "bench_serve_setup.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include "core/build_info.h"
#include "loadgen/dataset.h"
#include "loadgen/token_counter.h"

namespace tern::cli {

using namespace tern::loadgen;
using nlohmann::json;

void CommonFlags::add_to(ArgParser& args) {
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

}  // namespace tern::cli
