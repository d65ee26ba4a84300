// Reports: stable JSON keys, CSV rows, markdown table, and the sweep chart as
// valid SVG with the expected series.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "eval/xml_check.h"
#include "loadgen/report.h"

namespace tern::loadgen {
namespace {

RunResult sample_run(double ttft_s) {
  RunResult run;
  run.duration_s = 1.0;
  RequestResult r;
  r.sent = true;
  r.max_tokens = 3;
  r.call.http_status = 200;
  r.call.t_start = 0;
  r.call.t_first_token = ttft_s;
  r.call.t_chunks = {ttft_s, ttft_s + 0.01, ttft_s + 0.02};
  r.call.t_end = ttft_s + 0.02;
  r.call.usage_prompt_tokens = 5;
  r.call.usage_completion_tokens = 3;
  r.call.finish_reason = "length";
  run.requests.push_back(r);
  RequestResult bad;
  bad.sent = true;
  bad.call.error_type = "timeout";
  bad.call.error_message = "no complete answer before --timeout";
  run.requests.push_back(bad);
  return run;
}

TEST(Report, StableJsonKeys) {
  const RunResult run = sample_run(0.1);
  const RunMetrics m = compute_metrics(run, Slo{}, CostConfig{});
  const nlohmann::json j = serve_json(m, {m, m}, {{"model", "x"}});
  for (const char* key : {"completed", "failed", "duration_s", "request_throughput", "input_throughput",
                          "output_throughput", "goodput", "output_throughput_per_core", "cost_per_million_output_tokens"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* lat : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* stat : {"mean", "median", "p90", "p95", "p99"}) EXPECT_TRUE(j[lat].contains(stat)) << lat << stat;
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["errors"]["timeout"], 1);
  EXPECT_EQ(j["error_examples"]["timeout"], "no complete answer before --timeout");
  EXPECT_NEAR(j["ttft_ms"]["median"].get<double>(), 100.0, 1e-9);
  EXPECT_NEAR(j["tpot_ms"]["mean"].get<double>(), 10.0, 1e-9);
  EXPECT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["repeats"]["output_throughput"]["n"], 2);
  EXPECT_EQ(j["config"]["model"], "x");
  EXPECT_TRUE(j["cost_per_million_output_tokens"].is_null());
  const nlohmann::json empty = metrics_json(RunMetrics{});
  EXPECT_TRUE(empty["ttft_ms"]["p99"].is_null());
}

TEST(Report, CsvAndText) {
  const std::string csv = requests_csv({sample_run(0.1)});
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "repeat,index,ok,error_type,http_status,prompt_tokens,completion_tokens,usage_reported,max_tokens,"
            "ttft_ms,tpot_ms,e2e_ms,n_chunks,finish_reason");
  EXPECT_NE(csv.find("\n0,0,1,,200,5,3,1,3,100.000,10.000,120.000,3,length\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n0,1,0,timeout,0,"), std::string::npos) << csv;
  const RunMetrics m = compute_metrics(sample_run(0.1), Slo{}, CostConfig{});
  const std::string text = text_summary(m, {m, m});
  EXPECT_NE(text.find("error timeout: 1 (first: no complete answer before --timeout)"), std::string::npos) << text;
  EXPECT_NE(text.find("95% CI"), std::string::npos) << text;
}

std::vector<SweepPoint> sweep_points() {
  std::vector<SweepPoint> points;
  const double values[] = {1, 4, std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 3; ++i)
    points.push_back({i < 2 ? "rate " + std::to_string(static_cast<int>(values[i])) : "rate inf", values[i],
                      compute_metrics(sample_run(0.1 * (i + 1)), Slo{}, CostConfig{})});
  return points;
}

TEST(Report, SweepMarkdownAndJson) {
  const auto points = sweep_points();
  const std::string md = sweep_markdown(points, "request_rate");
  EXPECT_EQ(md.rfind("| request_rate | req/s | output tok/s |", 0), 0u) << md;
  EXPECT_NE(md.find("\n| inf | "), std::string::npos) << md;
  EXPECT_NE(md.find("\n| 4 | 1.00 | 3.0 |"), std::string::npos) << md;
  const nlohmann::json j = sweep_json(points, "request_rate", {});
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["points"][2]["request_rate"], "inf");
  EXPECT_EQ(j["points"][0]["request_rate"], 1.0);
  EXPECT_TRUE(j["points"][1].contains("ttft_ms"));
}

TEST(Report, SweepChartIsValidSvgWithTheSeries) {
  const eval::Chart chart = sweep_chart(sweep_points(), "latency vs throughput <test> & more");
  const std::string svg = eval::render_svg(chart);
  const test::XmlCheck x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error;
  std::set<std::string> names;
  for (const auto& e : x.elements)
    if (e.name == "g" && e.attrs.count("class") && e.attrs.at("class") == "series") names.insert(e.attrs.at("data-name"));
  EXPECT_EQ(names, (std::set<std::string>{"TTFT p50", "TTFT p99", "TPOT p50", "ITL p50", "e2e p50"}));
  ASSERT_EQ(chart.series[0].points.size(), 3u);
  EXPECT_NEAR(chart.series[0].points[1].y, 200.0, 1e-9);  // TTFT p50 of the second point
  EXPECT_NEAR(chart.series[0].points[1].x, 3.0, 1e-9);    // its output tokens/s
  EXPECT_EQ(chart.series[4].name, "e2e p50");
  EXPECT_EQ(chart.series[4].points[2].label, "rate inf");
}

}  // namespace
}  // namespace tern::loadgen
