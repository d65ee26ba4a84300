// Statistics against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/metrics.h"
#include "loadgen/stats.h"

namespace tern::loadgen {
namespace {

TEST(Stats, PercentileInterpolatesLikeNumpy) {
  // numpy.percentile([1..10], p): rank = p/100 * 9.
  const std::vector<double> v = {7, 3, 10, 1, 5, 2, 9, 4, 8, 6};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_NEAR(percentile(v, 90), 9.1, 1e-12);
  EXPECT_NEAR(percentile(v, 95), 9.55, 1e-12);
  EXPECT_NEAR(percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10.0);
  EXPECT_NEAR(percentile({10, 20, 30, 40}, 25), 17.5, 1e-12);  // rank 0.75
  EXPECT_DOUBLE_EQ(percentile({42}, 99), 42.0);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
}

TEST(Stats, MeanStdSummary) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_NEAR(stddev(v), std::sqrt(32.0 / 7.0), 1e-12);  // sample std: sum of squares 32 over n-1
  const Summary s = summarize(v);
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_NEAR(s.p90, 7.6, 1e-12);  // rank 6.3 between 7 and 9
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_EQ(summarize({}).n, 0u);
  EXPECT_DOUBLE_EQ(stddev({3}), 0.0);
}

TEST(Stats, StudentTCriticalValues) {
  EXPECT_NEAR(t_critical_95(1), 12.706, 1e-3);
  EXPECT_NEAR(t_critical_95(2), 4.303, 1e-3);
  EXPECT_NEAR(t_critical_95(4), 2.776, 1e-3);
  EXPECT_NEAR(t_critical_95(9), 2.262, 1e-3);
  EXPECT_NEAR(t_critical_95(30), 2.042, 1e-3);
  EXPECT_NEAR(t_critical_95(60), 2.000, 2e-3);   // table: 2.0003
  EXPECT_NEAR(t_critical_95(120), 1.980, 2e-3);  // table: 1.9799
  EXPECT_NEAR(t_critical_95(100000), 1.960, 1e-3);
}

TEST(Stats, ConfidenceIntervalAcrossRepeats) {
  // {10, 12, 14}: mean 12, std 2, half width 4.3027 * 2 / sqrt(3) = 4.96833.
  const RepeatSummary r = across_repeats({10, 12, 14});
  EXPECT_EQ(r.n, 3u);
  EXPECT_DOUBLE_EQ(r.mean, 12.0);
  EXPECT_DOUBLE_EQ(r.std, 2.0);
  EXPECT_NEAR(r.ci95_low, 7.03167, 1e-4);
  EXPECT_NEAR(r.ci95_high, 16.96833, 1e-4);
  const RepeatSummary one = across_repeats({5});
  EXPECT_DOUBLE_EQ(one.ci95_low, 5.0);
  EXPECT_DOUBLE_EQ(one.ci95_high, 5.0);
}

TEST(Stats, Goodput) {
  std::vector<SloSample> samples(3);
  samples[0] = {100, 500, 10.0};
  samples[1] = {200, 900, 30.0};
  samples[2] = {300, 310, std::nullopt};  // one output token: TPOT not judged
  Slo slo;
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 2.0), 1.5);  // no SLO: every request counts
  slo.ttft_ms = 250;
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 2.0), 1.0);
  slo.tpot_ms = 20;
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 2.0), 0.5);  // only the first meets both
  slo = {};
  slo.tpot_ms = 20;
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 2.0), 1.0);  // first and third
  slo.e2e_ms = 400;
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 2.0), 0.5);
  EXPECT_DOUBLE_EQ(goodput(samples, slo, 0.0), 0.0);
}

RequestResult ok_request(double t0, std::vector<double> chunks, double t_end, int prompt, int completion) {
  RequestResult r;
  r.sent = true;
  r.n_prompt_tokens_expected = prompt + 100;  // the server's usage must win
  r.call.http_status = 200;
  r.call.t_start = t0;
  r.call.t_first_token = chunks.front();
  r.call.t_chunks = std::move(chunks);
  r.call.t_end = t_end;
  r.call.usage_prompt_tokens = prompt;
  r.call.usage_completion_tokens = completion;
  return r;
}

TEST(Metrics, PerRunFiguresFromRecords) {
  RunResult run;
  run.duration_s = 2.0;
  // TTFT 100 ms, e2e 400 ms, 4 tokens: TPOT (400-100)/3 = 100 ms; ITL 100, 100, 100.
  run.requests.push_back(ok_request(0.0, {0.1, 0.2, 0.3, 0.4}, 0.4, 10, 4));
  // TTFT 300 ms, e2e 500 ms, 3 tokens in 2 chunks: TPOT 100 ms; ITL 200.
  run.requests.push_back(ok_request(1.0, {1.3, 1.5}, 1.5, 20, 3));
  RequestResult failed;
  failed.sent = true;
  failed.call.error_type = "http_429";
  run.requests.push_back(failed);
  run.requests.push_back(RequestResult{});  // never sent
  CostConfig cost;
  cost.n_cores = 4;
  cost.price_per_hour = 3.6;
  const RunMetrics m = compute_metrics(run, Slo{}, cost);
  EXPECT_EQ(m.completed, 2u);
  EXPECT_EQ(m.failed, 1u);
  EXPECT_EQ(m.not_sent, 1u);
  EXPECT_EQ(m.errors.at("http_429"), 1u);
  EXPECT_EQ(m.total_input_tokens, 30u);
  EXPECT_EQ(m.total_output_tokens, 7u);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.input_throughput, 15.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.5);
  EXPECT_NEAR(m.ttft_ms.mean, 200.0, 1e-9);
  EXPECT_NEAR(m.e2e_ms.median, 450.0, 1e-9);
  EXPECT_NEAR(m.tpot_ms.mean, 100.0, 1e-9);
  EXPECT_EQ(m.itl_ms.n, 4u);
  EXPECT_NEAR(m.itl_ms.max, 200.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(m.output_throughput_per_core, 3.5 / 4);
  // $3.6/h at 3.5 tok/s: 12600 tokens an hour -> 3.6 / 12600 * 1e6 = 285.714...
  ASSERT_TRUE(m.cost_per_million_output_tokens.has_value());
  EXPECT_NEAR(*m.cost_per_million_output_tokens, 285.7142857, 1e-6);
}

TEST(Metrics, ChunksCountWhenUsageIsMissing) {
  RunResult run;
  run.duration_s = 1.0;
  RequestResult r = ok_request(0.0, {0.1, 0.2, 0.3}, 0.3, 0, 0);
  r.call.usage_prompt_tokens.reset();
  r.call.usage_completion_tokens.reset();
  r.n_prompt_tokens_expected = 12;
  run.requests.push_back(r);
  const RunMetrics m = compute_metrics(run, Slo{}, CostConfig{});
  EXPECT_EQ(m.total_output_tokens, 3u);
  EXPECT_EQ(m.total_input_tokens, 12u);
  EXPECT_EQ(m.n_usage_missing, 1u);
  EXPECT_FALSE(m.cost_per_million_output_tokens.has_value());
}

TEST(Metrics, PooledRunsSumDurations) {
  RunResult a, b;
  a.duration_s = 1.0;
  b.duration_s = 3.0;
  a.requests.push_back(ok_request(0.0, {0.1, 0.2}, 0.2, 5, 2));
  b.requests.push_back(ok_request(0.0, {0.3, 0.4}, 0.4, 5, 2));
  const RunMetrics m = compute_metrics({&a, &b}, Slo{}, CostConfig{});
  EXPECT_EQ(m.completed, 2u);
  EXPECT_DOUBLE_EQ(m.duration_s, 4.0);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.5);
  EXPECT_NEAR(m.ttft_ms.mean, 200.0, 1e-9);
}

}  // namespace
}  // namespace tern::loadgen
