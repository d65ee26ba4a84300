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
#include "bench_serve_setup.h"
#include "commands.h"
#include "fd_limit.h"
#include "core/atomic_file.h"
#include "eval/svg_chart.h"
#include "loadgen/report.h"

extern char** environ;

namespace tern::cli {
namespace {

using namespace tern::loadgen;
using nlohmann::json;

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
