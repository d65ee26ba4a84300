// Streaming from the command line: `tern run --streaming` past the context,
// `tern batch` lines with a "streaming" or "kv_evict" field, and `tern perplexity
// --continuous` scoring one sequence under several modes (table, JSON, SVG).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using test::run_tern;

std::string quote(const std::string& s) { return test::shell_quote(s); }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(CliStreaming, RunGoesPastTheContextOnlyWhenAsked) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  auto plain = run_tern("run -m " + m + " -p 'Once upon a time' -n 700 --temp 0 --ignore-eos -t 2");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.err.find("finish context"), std::string::npos) << plain.err;
  auto streamed = run_tern("run -m " + m + " -p 'Once upon a time' -n 700 --temp 0 --ignore-eos -t 2 --streaming 4,252");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_NE(streamed.err.find("generation 700 tokens"), std::string::npos) << streamed.err;
  EXPECT_EQ(streamed.out.substr(0, 200), plain.out.substr(0, 200));
  auto bad = run_tern("run -m " + m + " -p x -n 5 --streaming 4");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("SINKS,WINDOW"), std::string::npos) << bad.err;
}

TEST(CliStreaming, BatchLinesCarryTheirOwnStreaming) {
  TERN_REQUIRE_STORIES();
  test::ScratchDir dir;
  const std::string in = dir / "in.jsonl";
  std::ofstream(in) << R"({"id": 1, "prompt": "Once", "max_tokens": 600, "temperature": 0, "ignore_eos": true, "streaming": "4,124"})"
                    << "\n"
                    << R"({"id": 2, "prompt": "Once", "max_tokens": 20, "temperature": 0, "streaming": {"sinks": 4}})" << "\n"
                    << R"({"id": 3, "prompt": "Once", "max_tokens": 300, "temperature": 0, "ignore_eos": true, "kv_evict": "h2o:128,32"})"
                    << "\n"
                    << R"({"id": 4, "prompt": "Once", "max_tokens": 20, "kv_evict": "h2o:9"})" << "\n";
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(in) + " --kv-memory 8M");
  // Line 2's object has no window: refused with the field named; line 1 runs past 512.
  size_t n_lines = 0;
  bool saw_long = false, saw_refusal = false, saw_evicting = false, saw_evict_refusal = false;
  for (size_t pos = 0; pos < o.out.size();) {
    const size_t nl = o.out.find('\n', pos);
    const auto j = nlohmann::json::parse(o.out.substr(pos, nl - pos));
    ++n_lines;
    if (j["id"] == 1) saw_long = j["n_tokens_generated"] == 600 && j["finish_reason"] == "length";
    if (j["id"] == 2) saw_refusal = j.contains("error") && j["error"].get<std::string>().find("'streaming'") != std::string::npos;
    if (j["id"] == 3) saw_evicting = j["n_tokens_generated"] == 300;
    if (j["id"] == 4) saw_evict_refusal = j.contains("error") && j["error"].get<std::string>().find("'h2o:9'") != std::string::npos;
    pos = nl == std::string::npos ? o.out.size() : nl + 1;
  }
  EXPECT_EQ(n_lines, 4u) << o.out << o.err;
  EXPECT_TRUE(saw_long) << o.out;
  EXPECT_TRUE(saw_refusal) << o.out;
  EXPECT_TRUE(saw_evicting) << o.out;
  EXPECT_TRUE(saw_evict_refusal) << o.out;
}

// Five modes over 300 tokens in segments of 60: while nothing is evicted
// (the first 60 tokens, all within 64 positions) every mode scores alike;
// the JSON and the chart carry every mode.
TEST(CliStreaming, ContinuousPerplexityComparesModes) {
  TERN_REQUIRE_STORIES();
  test::ScratchDir dir;
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  const std::string json = dir / "ppl.json", svg = dir / "ppl.svg";
  auto o = run_tern("perplexity -m " + quote(test::stories_gguf()) + " -f " + quote(text) +
                    " --continuous --modes 'dense 4,60 0,60 recompute:63 h2o:64,16' --max-tokens 300 --segment 60 -t 2"
                    " --json-out " + quote(json) + " --chart " + quote(svg));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| scored tokens | dense | 4,60 | 0,60 | recompute:63 | h2o:64,16 |"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(read_all(json));
  ASSERT_EQ(j["modes"].size(), 5u);
  EXPECT_EQ(j["tokens"], 300);
  const double first = j["modes"][0]["segments"][0];
  for (const auto& m : j["modes"]) {
    ASSERT_EQ(m["segments"].size(), 5u) << m.dump();
    EXPECT_NEAR(double(m["segments"][0]), first, 1e-3 * first) << m["mode"];
    for (double p : m["segments"]) EXPECT_TRUE(std::isfinite(p) && p > 1.0 && p < 100.0) << m.dump();
  }
  const std::string chart = read_all(svg);
  for (const char* name : {"dense", "4,60", "0,60", "recompute:63", "h2o:64,16"})
    EXPECT_NE(chart.find(std::string("data-name=\"") + name + "\""), std::string::npos) << name;
  auto bad = run_tern("perplexity -m " + quote(test::stories_gguf()) + " -f " + quote(text) + " --continuous --modes 'dense nope'");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("nope"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tern
