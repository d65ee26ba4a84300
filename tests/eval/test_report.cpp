#include <gtest/gtest.h>

#include "eval/report.h"
#include "eval/results.h"
#include "xml_check.h"

namespace tern::eval {
namespace {

QuantEval sample_eval() {
  QuantEval q;
  q.setup.cpu_model = "Test CPU @ 3GHz";
  q.setup.n_cores = 2;
  q.setup.ram_bytes = 8ull << 30;
  q.setup.git_sha = "abc1234";
  q.setup.compiler = "GNU 12.2.0";
  q.setup.command = "tern eval quant -m m.gguf -f t.txt";
  q.setup.model = "m.gguf";
  q.setup.threads = 2;
  q.text_path = "t.txt";
  q.n_ctx = 256;
  q.n_chunks = 2;
  q.n_tokens_scored = 254;
  q.n_prompt = 32, q.n_gen = 8, q.repetitions = 1;
  QuantEvalRow base;
  base.type = "base (F32)";
  base.is_base = true;
  base.file_bytes = 1 << 20;
  base.bits_per_weight = 32;
  base.ppl = 5.0, base.ppl_ratio = 1, base.kl_mean = 0, base.kl_median = 0, base.kl_p99 = 0, base.top1 = 1;
  base.pp_tok_s = 1000, base.tg_tok_s = 400, base.pp_tok_s_per_core = 500, base.tg_tok_s_per_core = 200;
  QuantEvalRow q8 = base;
  q8.type = "Q8_0";
  q8.is_base = false;
  q8.bits_per_weight = 8.5;
  q8.tensor_types = "Q8_0 x7, F32 x5";
  q8.n_fallback = 1;
  q8.kl_mean = 0.000123, q8.ppl_ratio = 1.001, q8.top1 = 0.99;
  QuantEvalRow mix = q8;
  mix.type = "auto 7.50";
  mix.auto_kl_predicted = 0.0166, mix.auto_kl_calib = 0.0177;
  q.rows = {base, q8, mix};
  return q;
}

TEST(Results, QuantEvalJsonRoundTrip) {
  const QuantEval q = sample_eval();
  auto f = parse_result_json(quant_eval_to_json(q), "q.json");
  ASSERT_TRUE(f) << f.status().message();
  ASSERT_EQ(f->kind, ResultKind::QuantEval);
  const QuantEval& r = f->quant;
  EXPECT_EQ(r.setup.cpu_model, "Test CPU @ 3GHz");
  EXPECT_EQ(r.setup.command, q.setup.command);
  EXPECT_EQ(r.n_ctx, 256);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_TRUE(r.rows[0].is_base);
  EXPECT_EQ(r.rows[1].type, "Q8_0");
  EXPECT_DOUBLE_EQ(r.rows[1].kl_mean, 0.000123);
  EXPECT_EQ(r.rows[1].n_fallback, 1);
  EXPECT_TRUE(std::isnan(r.rows[1].kl_max));      // NaN -> null -> NaN
  EXPECT_TRUE(std::isnan(r.rows[1].auto_kl_predicted));
  EXPECT_DOUBLE_EQ(r.rows[2].auto_kl_predicted, 0.0166);
  EXPECT_DOUBLE_EQ(r.rows[2].auto_kl_calib, 0.0177);
  EXPECT_TRUE(std::isnan(r.price_per_hour));
}

TEST(Results, RecognisesBenchAndServeJson) {
  const char* bench = R"({"pp": {"tokens": 512, "tok_s": 100.5, "std": 1.0}, "tg": {"tokens": 128, "tok_s": 20.0, "std": 0.5},
    "batched": [{"batch": 2, "tok_s": 35.0, "std": 1}], "model": "/m/x.gguf", "threads": 4, "weight_type": "Q4_K",
    "git_sha": "deadbee", "compiler": "GNU 12"})";
  auto b = parse_result_json(bench, "b.json");
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(b->kind, ResultKind::Bench);
  EXPECT_DOUBLE_EQ(b->bench.tg_tok_s, 20.0);
  EXPECT_EQ(b->bench.threads, 4);
  ASSERT_EQ(b->bench.batched.size(), 1u);
  const char* serve = R"({"completed": 100, "failed": 0, "duration_s": 12.5, "request_throughput": 8.0,
    "input_throughput": 900.0, "output_throughput": 450.0, "goodput": 7.5, "request_rate": 8,
    "ttft_ms": {"mean": 30, "median": 25, "p90": 50, "p95": 60, "p99": 90},
    "tpot_ms": {"mean": 5, "median": 4.5, "p90": 7, "p95": 8, "p99": 12}})";
  auto s = parse_result_json(serve, "s.json");
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->kind, ResultKind::Serve);
  EXPECT_DOUBLE_EQ(s->serve.latency.at("ttft_ms").p99, 90);
  EXPECT_EQ(s->serve.label, "request_rate 8");
  EXPECT_FALSE(parse_result_json("{\"hello\": 1}", "x.json"));
  EXPECT_NE(parse_result_json("{\"hello\": 1}", "x.json").status().message().find("x.json"), std::string::npos);
  EXPECT_FALSE(parse_result_json("{not json", "y.json"));
  EXPECT_FALSE(parse_result_json("[1, 2]", "z.json"));
}

TEST(Report, MarkdownTableEscapesCells) {
  const std::string md = markdown_table({"a", "b|c"}, {{"x|y", "line\nbreak"}}, "lr");
  EXPECT_EQ(md, "| a | b\\|c |\n| --- | ---: |\n| x\\|y | line break |\n");
  EXPECT_EQ(fmt(std::nan(""), 2), "n/a");
  EXPECT_EQ(fmt_sig(0.000123456), "0.000123");
  EXPECT_EQ(fmt_sig(1.5234), "1.52");
}

TEST(Report, QuantTableHasOneRowPerType) {
  const std::string t = quant_table(sample_eval());
  EXPECT_NE(t.find("| base (F32) |"), std::string::npos) << t;
  EXPECT_NE(t.find("| Q8_0 |"), std::string::npos);
  EXPECT_NE(t.find("Q8_0 x7, F32 x5 (1 fallback)"), std::string::npos);
  EXPECT_NE(t.find("tg tok/s/core"), std::string::npos);
  EXPECT_NE(t.find("calibration KL predicted 0.0166, measured 0.0177"), std::string::npos) << t;
  EXPECT_EQ(t.find("(1 fallback); calibration"), t.rfind("(1 fallback); calibration"));  // the mix's row only
  EXPECT_EQ(t.find("cost"), std::string::npos);  // no price given
  QuantEval priced = sample_eval();
  priced.price_per_hour = 2.0;
  EXPECT_NE(quant_table(priced).find("cost / M tg tokens"), std::string::npos);
}

TEST(Report, BuildsSetupTablesAndCharts) {
  std::vector<ResultFile> files;
  auto q = parse_result_json(quant_eval_to_json(sample_eval()), "/tmp/x/quant.json");
  ASSERT_TRUE(q);
  files.push_back(*q);
  auto b = parse_result_json(R"({"pp": {"tokens": 64, "tok_s": 10}, "tg": {"tokens": 8, "tok_s": 2},
      "batched": [{"batch": 1, "tok_s": 2}, {"batch": 4, "tok_s": 6}], "threads": 2, "model": "m.gguf"})", "bench.json");
  ASSERT_TRUE(b);
  files.push_back(*b);
  for (double rate : {1.0, 4.0}) {
    const std::string j = "{\"completed\": 10, \"request_throughput\": " + std::to_string(rate) +
                          ", \"output_throughput\": " + std::to_string(rate * 50) + ", \"request_rate\": " +
                          std::to_string(rate) + ", \"ttft_ms\": {\"median\": " + std::to_string(rate * 10) + "}}";
    auto s = parse_result_json(j, "serve" + std::to_string(static_cast<int>(rate)) + ".json");
    ASSERT_TRUE(s);
    files.push_back(*s);
  }
  ReportOptions o;
  o.chart_prefix = "r";
  o.assembler.date_utc = "2025-01-01T00:00:00Z";
  o.assembler.command = "tern report ...";
  const Report r = build_report(files, o);
  const std::string& md = r.markdown;
  EXPECT_NE(md.find("## Setup"), std::string::npos);
  EXPECT_NE(md.find("Test CPU @ 3GHz, 2 logical cores, 8.0 GiB RAM"), std::string::npos) << md;
  EXPECT_NE(md.find("tern eval quant -m m.gguf -f t.txt"), std::string::npos);
  EXPECT_NE(md.find("## Quantization"), std::string::npos);
  EXPECT_NE(md.find("## Throughput"), std::string::npos);
  EXPECT_NE(md.find("## Serving"), std::string::npos);
  EXPECT_NE(md.find("| bench.json | m.gguf | n/a | 2 | 10.00 | 2.00 | 5.00 | 1.00 |"), std::string::npos) << md;
  // Charts: quant scatter, batched curve, latency-throughput; each embedded and valid XML.
  ASSERT_EQ(r.charts.size(), 3u);
  for (const auto& [name, svg] : r.charts) {
    EXPECT_NE(md.find("](" + name + ")"), std::string::npos) << name;
    const auto x = test::check_xml(svg);
    EXPECT_TRUE(x.ok) << name << ": " << x.error;
  }
  const auto x = test::check_xml(r.charts[0].second);
  std::vector<std::string> series;
  for (const auto& e : x.elements)
    if (e.attrs.count("class") && e.attrs.at("class") == "series") series.push_back(e.attrs.at("data-name"));
  EXPECT_EQ(series, (std::vector<std::string>{"base (F32)", "Q8_0", "auto 7.50"}));
}

}  // namespace
}  // namespace tern::eval
