// End-to-end: the `tern` binary saves base logits for stories260K, measures KL
// of the same model and of a Q8_0 quantization against them, runs
// `tern eval quant` with two types, and `tern report` on its JSON.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../model/model_fixture.h"
#include "cli/run_tern.h"
#include "eval/results.h"
#include "sanitized.h"
#include "xml_check.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

using Output = test::TernOutput;
std::string quote(const std::string& s) { return test::shell_quote(s); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class EvalCli : public ::testing::Test {
 protected:
  static fs::path dir() {
    static const fs::path d = fs::path(TERN_BINARY_DIR) / ("eval_cli." + std::to_string(::getpid()));
    return d;
  }
  static void SetUpTestSuite() { fs::create_directories(dir()); }
  static void TearDownTestSuite() { fs::remove_all(dir()); }

  static Output tern(const std::string& args) { return test::run_tern(args); }
  static std::string text() { return quote(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt"); }
  // Three windows of 128 tokens: enough to compare, quick to run.
  static std::string ppl_args(const std::string& model) {
    return "perplexity -m " + quote(model) + " -f " + text() + " -c 128 --chunks 3 -t 2 ";
  }
  static const std::string& base_logits() {
    static const std::string path = [] {
      const std::string p = (dir() / "base.logits").string();
      const Output o = tern(ppl_args(test::stories_gguf()) + "--save-logits " + quote(p));
      EXPECT_EQ(o.exit_code, 0) << o.err;
      return p;
    }();
    return path;
  }
};

TEST_F(EvalCli, KlOfTheSameModelIsZero) {
  TERN_REQUIRE_STORIES();
  ASSERT_TRUE(fs::exists(base_logits()));
  const Output o = tern(ppl_args(test::stories_gguf()) + "--json --kl-divergence " + quote(base_logits()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_LT(j["kl_mean"].get<double>(), 1e-5);
  EXPECT_LT(j["kl_p99"].get<double>(), 1e-4);
  EXPECT_DOUBLE_EQ(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_NEAR(j["ppl_ratio"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(j["tokens"].get<int>(), 3 * 63);
}

TEST_F(EvalCli, KlOfQ8IsSmallAndPositive) {
  TERN_REQUIRE_STORIES();
  const std::string q8 = (dir() / "q8.gguf").string();
  const Output q = tern("quantize " + quote(test::stories_gguf()) + " " + quote(q8) + " Q8_0 -t 2");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const Output o = tern(ppl_args(q8) + "--kl-divergence " + quote(base_logits()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("KL divergence vs base"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("top-1 agreement"), std::string::npos);
  const Output j = tern(ppl_args(q8) + "--json --kl-divergence " + quote(base_logits()));
  const auto r = nlohmann::json::parse(j.out);
  EXPECT_GT(r["kl_mean"].get<double>(), 1e-7);
  EXPECT_LT(r["kl_mean"].get<double>(), 0.05);
  EXPECT_GT(r["top1_agreement"].get<double>(), 0.9);
}

TEST_F(EvalCli, MismatchedLogitsAreRejected) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  const Output ctx = tern("perplexity -m " + m + " -f " + text() + " -c 64 --chunks 3 --kl-divergence " + quote(base_logits()));
  EXPECT_NE(ctx.exit_code, 0);
  EXPECT_NE(ctx.err.find("-c 128"), std::string::npos) << ctx.err;
  const Output chunks = tern("perplexity -m " + m + " -f " + text() + " -c 128 --chunks 2 --kl-divergence " + quote(base_logits()));
  EXPECT_NE(chunks.exit_code, 0);
  const fs::path cut = dir() / "cut.logits";
  fs::copy_file(base_logits(), cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  const Output trunc = tern(ppl_args(test::stories_gguf()) + "--kl-divergence " + quote(cut.string()));
  EXPECT_NE(trunc.exit_code, 0);
  EXPECT_NE(trunc.err.find("truncated"), std::string::npos) << trunc.err;
}

TEST_F(EvalCli, EvalQuantThenReport) {
  TERN_REQUIRE_STORIES();
  const fs::path json = dir() / "quant.json", svg = dir() / "quant.svg", md = dir() / "REPORT.md";
  const Output o = tern("eval quant -m " + quote(test::stories_gguf()) + " -f " + text() +
                        " --types Q8_0,Q4_0 -c 128 --chunks 2 -p 16 -n 4 -r 1 -t 2 --price-per-hour 1.5 --json " +
                        quote(json.string()) + " --plot " + quote(svg.string()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| type |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("| base (F32) |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("| Q8_0 |"), std::string::npos);
  EXPECT_NE(o.out.find("| Q4_0 |"), std::string::npos);
  EXPECT_NE(o.out.find("cost / M tg tokens"), std::string::npos);

  auto parsed = eval::parse_result_json(slurp(json), json.string());
  ASSERT_TRUE(parsed) << parsed.status().message();
  ASSERT_EQ(parsed->kind, eval::ResultKind::QuantEval);
  const auto& rows = parsed->quant.rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].kl_mean, 0.0);
  EXPECT_GT(rows[2].kl_mean, rows[1].kl_mean);  // Q4_0 further from the base than Q8_0
  EXPECT_LT(rows[1].bits_per_weight, rows[0].bits_per_weight);
  EXPECT_GT(rows[1].tg_tok_s, 0.0);
  EXPECT_FALSE(parsed->quant.setup.cpu_model.empty());
  EXPECT_NE(parsed->quant.setup.command.find("eval quant"), std::string::npos);

  const auto x = test::check_xml(slurp(svg));
  ASSERT_TRUE(x.ok) << x.error;
  std::vector<std::string> series;
  for (const auto& e : x.elements)
    if (e.attrs.count("class") && e.attrs.at("class") == "series") series.push_back(e.attrs.at("data-name"));
  EXPECT_EQ(series, (std::vector<std::string>{"base (F32)", "Q8_0", "Q4_0"}));
  if (std::system("command -v xmllint >/dev/null 2>&1") == 0) {
    EXPECT_EQ(std::system(("xmllint --noout " + quote(svg.string())).c_str()), 0);
  }

  const Output r = tern("report " + quote(json.string()) + " -o " + quote(md.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string report = slurp(md);
  EXPECT_NE(report.find("## Setup"), std::string::npos) << report;
  EXPECT_NE(report.find("| Q4_0 |"), std::string::npos);
  EXPECT_NE(report.find("](REPORT-1.svg)"), std::string::npos);
  EXPECT_TRUE(test::check_xml(slurp(dir() / "REPORT-1.svg")).ok);
  const Output bad = tern("report " + quote(md.string()) + " -o " + quote((dir() / "x.md").string()));
  EXPECT_NE(bad.exit_code, 0);
}

// --kv-type on perplexity: f32 is the default exactly; a quantized cache costs something,
// measured against the f32-cache logits; q4_0 more than q8_0.
TEST_F(EvalCli, PerplexityMeasuresWhatTheKvCacheCosts) {
  TERN_REQUIRE_STORIES();
  ASSERT_TRUE(fs::exists(base_logits()));
  auto kl_of = [&](const std::string& kv) {
    const Output o = tern(ppl_args(test::stories_gguf()) + "--json --kv-type " + kv + " --kl-divergence " + quote(base_logits()));
    EXPECT_EQ(o.exit_code, 0) << o.err;
    return o.exit_code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json::object();
  };
  const auto f32 = kl_of("f32"), q8 = kl_of("q8_0"), q4 = kl_of("q4_0");
  ASSERT_TRUE(f32.contains("kl_mean") && q8.contains("kl_mean") && q4.contains("kl_mean"));
  std::printf("KV cache KL from f32: f32 %.3g, q8_0 %.3g, q4_0 %.3g\n", f32["kl_mean"].get<double>(),
              q8["kl_mean"].get<double>(), q4["kl_mean"].get<double>());
  // The f32 run is the base itself: only the saved log-probabilities' F16 rounding (~1e-7).
  EXPECT_LT(f32["kl_mean"].get<double>(), 1e-6);
  EXPECT_NEAR(f32["ppl_ratio"].get<double>(), 1.0, 1e-12);
  EXPECT_GT(q8["kl_mean"].get<double>(), 10 * f32["kl_mean"].get<double>());
  EXPECT_LT(q8["kl_mean"].get<double>(), 0.01);
  EXPECT_GT(q4["kl_mean"].get<double>(), q8["kl_mean"].get<double>());
  const Output bad = tern(ppl_args(test::stories_gguf()) + "--kv-type q5_9");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("q8_0"), std::string::npos) << bad.err;
}

// --kv-types: rows of the base weights with each K/V cache, in the same table and JSON, with the
// cache's bytes per token (f16 half of f32, q8_0 less, q4_0 less still).
TEST_F(EvalCli, EvalQuantWithKvTypes) {
  TERN_REQUIRE_STORIES();
  const fs::path json = dir() / "kv.json";
  const Output o = tern("eval quant -m " + quote(test::stories_gguf()) + " -f " + text() +
                        " --types Q8_0 --kv-types f16,q8_0,q4_0 -c 128 --chunks 2 -p 16 -n 4 -r 1 -t 2 --json " +
                        quote(json.string()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| KV cache | KV bytes/token |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("| base (F32), KV q8_0 |"), std::string::npos) << o.out;
  auto parsed = eval::parse_result_json(slurp(json), json.string());
  ASSERT_TRUE(parsed) << parsed.status().message();
  const auto& rows = parsed->quant.rows;
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].kv_type, "f32");
  EXPECT_EQ(rows[1].kv_type, "f32");  // Q8_0 weights, f32 cache
  EXPECT_EQ(rows[2].kv_type, "f16");
  EXPECT_EQ(rows[3].kv_type, "q8_0");
  EXPECT_EQ(rows[4].kv_type, "q4_0");
  EXPECT_DOUBLE_EQ(rows[2].kv_bytes_per_token, rows[0].kv_bytes_per_token / 2);
  EXPECT_LT(rows[3].kv_bytes_per_token, rows[2].kv_bytes_per_token);
  EXPECT_LT(rows[4].kv_bytes_per_token, rows[3].kv_bytes_per_token);
  EXPECT_GT(rows[4].kl_mean, rows[3].kl_mean);
  for (size_t i = 2; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].file_bytes, rows[0].file_bytes) << "the same weights";
    EXPECT_GT(rows[i].tg_tok_s, 0.0);
  }
  const Output bad = tern("eval quant -m " + quote(test::stories_gguf()) + " -f " + text() + " --kv-types q8_0,bf3");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--kv-types 'bf3'"), std::string::npos) << bad.err;
}

// --auto-bpw: an automatic mix per bits/weight, chosen on calibration text
// disjoint from the evaluated text, measured as one more row.
TEST_F(EvalCli, EvalQuantWithAnAutomaticMix) {
  TERN_REQUIRE_STORIES();
  const std::string all = slurp(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
  const size_t cut = all.find("\n\n", all.size() / 2) + 2;
  const fs::path calib_txt = dir() / "calib.txt", eval_txt = dir() / "eval.txt", calib = dir() / "calib.gguf";
  std::ofstream(calib_txt, std::ios::binary) << all.substr(0, cut);
  std::ofstream(eval_txt, std::ios::binary) << all.substr(cut);
  const std::string m = quote(test::stories_gguf());
  // Under a sanitizer half the calibration windows: every sensitivity pass runs
  // over all of them (88 s of the ASan suite with 4).
  const std::string chunks = test::kSanitized ? "2" : "4";
  const Output c = tern("calibrate -m " + m + " -f " + quote(calib_txt.string()) + " -c 64 --chunks " + chunks + " -o " +
                        quote(calib.string()));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const fs::path json = dir() / "auto.json";
  const std::string base = "eval quant -m " + m + " -f " + quote(eval_txt.string()) + " -c 128 --chunks 2 -p 0 -n 0 -r 1 -t 2 ";
  const Output o = tern(base + "--types Q8_0 --calib " + quote(calib.string()) +
                        " --auto-bpw 9.5 --auto-types Q4_0,Q8_0,F16 --json " + quote(json.string()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| auto 9.50 |"), std::string::npos) << o.out;
  auto parsed = eval::parse_result_json(slurp(json), json.string());
  ASSERT_TRUE(parsed) << parsed.status().message();
  const auto& rows = parsed->quant.rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].type, "auto 9.50");
  EXPECT_LE(rows[2].bits_per_weight, 9.5);
  EXPECT_GT(rows[2].kl_mean, 0.0);
  EXPECT_TRUE(std::isfinite(rows[2].auto_kl_predicted));
  EXPECT_TRUE(std::isnan(rows[1].auto_kl_predicted));
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--types Q8_0 --auto-bpw 9.5", "--auto-bpw needs --calib"},
           {"--types Q8_0 --auto-bpw 9.5x --calib " + quote(calib.string()), "is not a number"},
       }) {
    const Output e = tern(base + args);
    EXPECT_NE(e.exit_code, 0) << args;
    EXPECT_NE(e.err.find(needle), std::string::npos) << args << " -> " << e.err;
  }
}

}  // namespace
}  // namespace tern
