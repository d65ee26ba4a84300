#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>

#include "eval/kl_divergence.h"

namespace tern::loadgen {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return eval::percentile(sorted, std::clamp(p, 0.0, 100.0) / 100.0);  // the one interpolation rule
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = mean(values);
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size() - 1));
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  if (values.empty()) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.n = sorted.size();
  s.mean = mean(sorted);
  s.std = stddev(sorted);
  s.median = percentile_sorted(sorted, 50);
  s.p90 = percentile_sorted(sorted, 90);
  s.p95 = percentile_sorted(sorted, 95);
  s.p99 = percentile_sorted(sorted, 99);
  s.max = sorted.back();
  return s;
}

double t_critical_95(size_t df) {
  // t_{0.975, df} for df = 1..30.
  static constexpr double kTable[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                        2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                        2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                        2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  constexpr double kNormal = 1.959964;
  if (df == 0) return 0;
  if (df <= 30) return kTable[df - 1];
  // Between df = 30 and infinity t is very nearly linear in 1/df.
  return kNormal + (kTable[29] - kNormal) * (30.0 / static_cast<double>(df));
}

RepeatSummary across_repeats(const std::vector<double>& per_repeat) {
  RepeatSummary r;
  r.n = per_repeat.size();
  r.mean = mean(per_repeat);
  r.std = stddev(per_repeat);
  r.ci95_low = r.ci95_high = r.mean;
  if (r.n >= 2) {
    const double half = t_critical_95(r.n - 1) * r.std / std::sqrt(static_cast<double>(r.n));
    r.ci95_low = r.mean - half;
    r.ci95_high = r.mean + half;
  }
  return r;
}

bool meets_slo(const SloSample& s, const Slo& slo) {
  if (slo.ttft_ms && s.ttft_ms > *slo.ttft_ms) return false;
  if (slo.e2e_ms && s.e2e_ms > *slo.e2e_ms) return false;
  if (slo.tpot_ms && s.tpot_ms && *s.tpot_ms > *slo.tpot_ms) return false;
  return true;
}

double goodput(const std::vector<SloSample>& samples, const Slo& slo, double duration_s) {
  if (duration_s <= 0) return 0;
  size_t good = 0;
  for (const auto& s : samples) good += meets_slo(s, slo) ? 1 : 0;
  return static_cast<double>(good) / duration_s;
}

}  // namespace tern::loadgen
