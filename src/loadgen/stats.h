// loadgen/stats.h — the statistics a serving benchmark reports.
//
// Contract: pure functions over plain vectors; nothing here knows about HTTP.
// - percentile(): linear interpolation between closest ranks, the same rule as
//   numpy.percentile's default ("linear"): rank = p/100 * (n-1).
// - summarize(): mean, median, p90, p95, p99 and the sample standard deviation
//   of one metric over the requests of a run. An empty input gives n = 0 and
//   zeros (reports print such a summary as null).
// - across_repeats(): mean ± sample std and a two-sided 95% Student-t confidence
//   interval of one scalar measured once per repeat (n - 1 degrees of freedom).
// - goodput(): requests that met every given SLO, per second.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace tern::loadgen {

// p in [0, 100]; values need not be sorted. Empty -> 0.
double percentile(std::vector<double> values, double p);
// Same on values already sorted ascending (no copy).
double percentile_sorted(const std::vector<double>& sorted, double p);

double mean(const std::vector<double>& values);
// Sample standard deviation (divides by n - 1); 0 when n < 2.
double stddev(const std::vector<double>& values);

struct Summary {
  size_t n = 0;
  double mean = 0, std = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};
Summary summarize(const std::vector<double>& values);

// Two-sided 95% critical value of Student's t with `df` degrees of freedom
// (exact table to 30, then interpolated in 1/df towards the normal 1.95996).
double t_critical_95(size_t df);

struct RepeatSummary {
  size_t n = 0;
  double mean = 0, std = 0;
  double ci95_low = 0, ci95_high = 0;  // mean ± t * std / sqrt(n); equal to the mean when n < 2
};
RepeatSummary across_repeats(const std::vector<double>& per_repeat);

// Service-level objectives; an absent bound is not checked.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};

// One successful request as the SLO check sees it. tpot_ms is absent for a
// request with a single output token (no per-token time to judge).
struct SloSample {
  double ttft_ms = 0, e2e_ms = 0;
  std::optional<double> tpot_ms;
};
bool meets_slo(const SloSample& s, const Slo& slo);
// Requests meeting every SLO divided by duration_s (0 when duration_s <= 0).
// With no SLO given every successful request counts.
double goodput(const std::vector<SloSample>& samples, const Slo& slo, double duration_s);

}  // namespace tern::loadgen
