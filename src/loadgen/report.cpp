#include "loadgen/report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace tern::loadgen {
namespace {

using json = nlohmann::json;

json summary_json(const Summary& s) {
  if (s.n == 0)
    return {{"mean", nullptr}, {"median", nullptr}, {"p90", nullptr}, {"p95", nullptr}, {"p99", nullptr},
            {"std", nullptr}, {"max", nullptr}, {"n", 0}};
  return {{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p95", s.p95}, {"p99", s.p99},
          {"std", s.std},   {"max", s.max},       {"n", s.n}};
}

json repeat_json(const RepeatSummary& r) {
  return {{"mean", r.mean}, {"std", r.std}, {"ci95_low", r.ci95_low}, {"ci95_high", r.ci95_high}, {"n", r.n}};
}

// v with `decimals` digits after the point.
std::string fmt(int decimals, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_value(double v) {
  if (!std::isfinite(v)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The per-repeat figures summarised across repeats, by JSON name.
struct Figure {
  const char* name;
  double (*get)(const RunMetrics&);
};
constexpr Figure kFigures[] = {
    {"request_throughput", [](const RunMetrics& m) { return m.request_throughput; }},
    {"input_throughput", [](const RunMetrics& m) { return m.input_throughput; }},
    {"output_throughput", [](const RunMetrics& m) { return m.output_throughput; }},
    {"goodput", [](const RunMetrics& m) { return m.goodput; }},
    {"ttft_ms_mean", [](const RunMetrics& m) { return m.ttft_ms.mean; }},
    {"ttft_ms_median", [](const RunMetrics& m) { return m.ttft_ms.median; }},
    {"tpot_ms_mean", [](const RunMetrics& m) { return m.tpot_ms.mean; }},
    {"itl_ms_mean", [](const RunMetrics& m) { return m.itl_ms.mean; }},
    {"e2e_ms_mean", [](const RunMetrics& m) { return m.e2e_ms.mean; }},
    {"e2e_ms_p99", [](const RunMetrics& m) { return m.e2e_ms.p99; }},
};

std::vector<double> per_repeat(const std::vector<RunMetrics>& runs, double (*get)(const RunMetrics&)) {
  std::vector<double> v;
  for (const auto& m : runs) v.push_back(get(m));
  return v;
}

std::string summary_line(const char* name, const Summary& s) {
  if (s.n == 0) return std::string(name) + ": no samples\n";
  return std::string(name) + ": mean " + fmt(2, s.mean) + "  median " + fmt(2, s.median) + "  p90 " +
         fmt(2, s.p90) + "  p95 " + fmt(2, s.p95) + "  p99 " + fmt(2, s.p99) + " ms\n";
}

std::string ms_cell(const Summary& s, double v) { return s.n == 0 ? "-" : fmt(1, v); }

}  // namespace

json metrics_json(const RunMetrics& m) {
  json j;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["not_sent"] = m.not_sent;
  j["errors"] = json::object();
  j["error_examples"] = json::object();
  for (const auto& [type, n] : m.errors) j["errors"][type] = n;
  for (const auto& [type, message] : m.error_examples) j["error_examples"][type] = message;
  j["duration_s"] = m.duration_s;
  j["request_throughput"] = m.request_throughput;
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["goodput"] = m.goodput;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["usage_missing"] = m.n_usage_missing;
  j["ttft_ms"] = summary_json(m.ttft_ms);
  j["tpot_ms"] = summary_json(m.tpot_ms);
  j["itl_ms"] = summary_json(m.itl_ms);
  j["e2e_ms"] = summary_json(m.e2e_ms);
  j["cores"] = m.n_cores;
  j["output_throughput_per_core"] = m.output_throughput_per_core;
  j["cost_per_million_output_tokens"] =
      m.cost_per_million_output_tokens ? json(*m.cost_per_million_output_tokens) : json(nullptr);
  return j;
}

json repeats_json(const std::vector<RunMetrics>& runs) {
  json j = json::object();
  for (const Figure& f : kFigures) j[f.name] = repeat_json(across_repeats(per_repeat(runs, f.get)));
  return j;
}

json serve_json(const RunMetrics& pooled, const std::vector<RunMetrics>& runs, const json& config) {
  json j = metrics_json(pooled);
  j["runs"] = json::array();
  for (const auto& m : runs) j["runs"].push_back(metrics_json(m));
  j["repeats"] = repeats_json(runs);
  j["config"] = config;
  return j;
}

std::string requests_csv(const std::vector<RunResult>& runs) {
  std::ostringstream out;
  out << "repeat,index,ok,error_type,http_status,prompt_tokens,completion_tokens,usage_reported,max_tokens,"
         "ttft_ms,tpot_ms,e2e_ms,n_chunks,finish_reason\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    for (size_t i = 0; i < runs[k].requests.size(); ++i) {
      const RequestResult& r = runs[k].requests[i];
      if (!r.sent) continue;
      const CallRecord& c = r.call;
      const int n_out = completion_tokens_of(r);
      const double e2e = (c.t_end - c.t_start) * 1e3;
      const double ttft = ((c.t_first_token ? *c.t_first_token : c.t_end) - c.t_start) * 1e3;
      out << k << ',' << i << ',' << (c.ok() ? 1 : 0) << ',' << c.error_type << ',' << c.http_status << ','
          << prompt_tokens_of(r) << ',' << n_out << ',' << (c.usage_completion_tokens ? 1 : 0) << ','
          << r.max_tokens << ',' << fmt(3, ttft) << ','
          << (c.ok() && n_out >= 2 ? fmt(3, (e2e - ttft) / (n_out - 1)) : "") << ',' << fmt(3, e2e) << ','
          << c.t_chunks.size() << ',' << c.finish_reason << '\n';
    }
  }
  return out.str();
}

std::string text_summary(const RunMetrics& m, const std::vector<RunMetrics>& runs) {
  std::string s;
  s += "completed " + std::to_string(m.completed) + ", failed " + std::to_string(m.failed);
  if (m.not_sent) s += ", not sent " + std::to_string(m.not_sent);
  s += " in " + fmt(2, m.duration_s) + " s\n";
  for (const auto& [type, n] : m.errors) {
    s += "  error " + type + ": " + std::to_string(n);
    const auto ex = m.error_examples.find(type);
    if (ex != m.error_examples.end() && !ex->second.empty()) s += " (first: " + ex->second.substr(0, 160) + ")";
    s += "\n";
  }
  s += "request throughput " + fmt(3, m.request_throughput) + " req/s, goodput " + fmt(3, m.goodput) +
       " req/s\n";
  s += "input " + fmt(1, m.input_throughput) + " tok/s, output " + fmt(1, m.output_throughput) +
       " tok/s (" + fmt(2, m.output_throughput_per_core) + " tok/s per core, " + std::to_string(m.n_cores) +
       " cores)\n";
  if (m.cost_per_million_output_tokens)
    s += "cost " + fmt(4, *m.cost_per_million_output_tokens) + " per million output tokens\n";
  s += summary_line("TTFT", m.ttft_ms) + summary_line("TPOT", m.tpot_ms) + summary_line("ITL ", m.itl_ms) +
       summary_line("e2e ", m.e2e_ms);
  if (runs.size() >= 2) {
    for (const Figure& f : kFigures) {
      const RepeatSummary r = across_repeats(per_repeat(runs, f.get));
      s += std::string("  across ") + std::to_string(r.n) + " repeats " + f.name + ": " + fmt(3, r.mean) +
           " ± " + fmt(3, r.std) + " (95% CI " + fmt(3, r.ci95_low) + " .. " + fmt(3, r.ci95_high) +
           ")\n";
    }
  }
  return s;
}

std::string sweep_markdown(const std::vector<SweepPoint>& points, const std::string& swept) {
  std::string s = "| " + swept +
                  " | req/s | output tok/s | tok/s/core | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | ITL p50 | "
                  "ITL p99 | e2e p50 | e2e p99 | goodput | failed |\n";
  s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const SweepPoint& p : points) {
    const RunMetrics& m = p.metrics;
    s += "| " + fmt_value(p.value) + " | " +
         fmt(2, m.request_throughput) + " | " + fmt(1, m.output_throughput) + " | " +
         fmt(2, m.output_throughput_per_core) + " | " + ms_cell(m.ttft_ms, m.ttft_ms.median) + " | " +
         ms_cell(m.ttft_ms, m.ttft_ms.p99) + " | " + ms_cell(m.tpot_ms, m.tpot_ms.median) + " | " +
         ms_cell(m.tpot_ms, m.tpot_ms.p99) + " | " + ms_cell(m.itl_ms, m.itl_ms.median) + " | " +
         ms_cell(m.itl_ms, m.itl_ms.p99) + " | " + ms_cell(m.e2e_ms, m.e2e_ms.median) + " | " +
         ms_cell(m.e2e_ms, m.e2e_ms.p99) + " | " + fmt(2, m.goodput) + " | " + std::to_string(m.failed) + " |\n";
  }
  s += "\nLatencies in ms; req/s, tok/s and goodput per second of run time.\n";
  return s;
}

json sweep_json(const std::vector<SweepPoint>& points, const std::string& swept, const json& config) {
  json j;
  j["swept"] = swept;
  j["points"] = json::array();
  for (const SweepPoint& p : points) {
    json point = metrics_json(p.metrics);
    point[swept] = std::isfinite(p.value) ? json(p.value) : json("inf");
    point["label"] = p.label;
    j["points"].push_back(std::move(point));
  }
  j["config"] = config;
  return j;
}

eval::Chart sweep_chart(const std::vector<SweepPoint>& points, const std::string& title) {
  eval::Chart chart;
  chart.title = title;
  chart.x_label = "output throughput (tokens/s)";
  chart.y_label = "latency (ms)";
  chart.y_log = true;
  struct Line {
    const char* name;
    const Summary RunMetrics::*summary;
    bool p99;
  };
  constexpr Line kLines[] = {{"TTFT p50", &RunMetrics::ttft_ms, false}, {"TTFT p99", &RunMetrics::ttft_ms, true},
                             {"TPOT p50", &RunMetrics::tpot_ms, false}, {"ITL p50", &RunMetrics::itl_ms, false},
                             {"e2e p50", &RunMetrics::e2e_ms, false}};
  for (const Line& line : kLines) {
    eval::ChartSeries series;
    series.name = line.name;
    for (const SweepPoint& p : points) {
      const Summary& s = p.metrics.*line.summary;
      if (s.n == 0) continue;
      // Point labels on one series only, so they do not pile up.
      const bool labelled = line.summary == &RunMetrics::e2e_ms;
      series.points.push_back({p.metrics.output_throughput, line.p99 ? s.p99 : s.median, labelled ? p.label : ""});
    }
    chart.series.push_back(std::move(series));
  }
  return chart;
}

}  // namespace tern::loadgen
