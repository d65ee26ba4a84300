// loadgen/report.h — what a serving benchmark writes: JSON, CSV, a text
// summary, and for sweeps a markdown table and a latency–throughput chart.
//
// Contract: the JSON top-level keys completed, failed, duration_s,
// request_throughput, input_throughput, output_throughput, goodput and the
// latency objects ttft_ms, tpot_ms, itl_ms, e2e_ms (each with mean, median,
// p90, p95, p99) are stable: scripts rely on them. A latency object with no
// samples has null fields. New keys may be added; none is renamed.
// Threading: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/svg_chart.h"
#include "loadgen/metrics.h"

namespace tern::loadgen {

// The stable keys of one RunMetrics (plus totals, errors and cost).
nlohmann::json metrics_json(const RunMetrics& m);

// Per-figure mean, std and 95% CI across repeats.
nlohmann::json repeats_json(const std::vector<RunMetrics>& runs);

// The `tern bench serve --json` document: pooled metrics at the top level,
// "runs" (one object per repeat), "repeats" (across-repeat statistics) and
// the given "config" object.
nlohmann::json serve_json(const RunMetrics& pooled, const std::vector<RunMetrics>& runs,
                          const nlohmann::json& config);

// One CSV row per request of every repeat, with a header line.
std::string requests_csv(const std::vector<RunResult>& runs);

// The human-readable summary (several lines, ends with '\n').
std::string text_summary(const RunMetrics& pooled, const std::vector<RunMetrics>& runs);

struct SweepPoint {
  std::string label;  // "rate 4", "rate inf", "conc 16"
  double value = 0;   // the swept rate or concurrency (infinity allowed)
  RunMetrics metrics;
};

std::string sweep_markdown(const std::vector<SweepPoint>& points, const std::string& swept);
nlohmann::json sweep_json(const std::vector<SweepPoint>& points, const std::string& swept,
                          const nlohmann::json& config);
// x = output tokens/s, y = latency in ms; series "TTFT p50", "TTFT p99",
// "TPOT p50", "ITL p50", "e2e p50" (log y so they share one chart).
eval::Chart sweep_chart(const std::vector<SweepPoint>& points, const std::string& title);

}  // namespace tern::loadgen
