// End-to-end tests of the `tern` binary: real subprocesses, real files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using Output = test::TernOutput;
using test::run_tern;
using test::tern_bin;
std::string quote(const std::string& s) { return test::shell_quote(s); }

TEST(Cli, GreedyRunPrintsGoldenText) {
  TERN_REQUIRE_STORIES();
  auto o = run_tern("run -m " + quote(test::stories_gguf()) + " -p '' -n 200 --temp 0 -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, test::golden_text());
  EXPECT_NE(o.err.find("tok/s"), std::string::npos) << "timings belong on stderr";
}

TEST(Cli, SpeculativeRunPrintsGoldenTextAndCounts) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  for (const std::string& draft : {std::string("ngram"), test::stories_gguf(), std::string("self:Q8_0")}) {
    auto o = run_tern("run -m " + m + " -p '' -n 200 --temp 0 -t 2 --draft " + quote(draft) + " --spec-k 6");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, test::golden_text()) << draft;
    EXPECT_NE(o.err.find("accepted"), std::string::npos) << o.err;
  }
  auto tree = run_tern("run -m " + m + " -p '' -n 200 --temp 0 -t 2 --draft ngram --spec-k 6 --spec-tree 3");
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(tree.out, test::golden_text()) << "token trees";
  auto bad_tree = run_tern("run -m " + m + " -p '' -n 4 --draft ngram --spec-tree 9");
  EXPECT_NE(bad_tree.exit_code, 0);
  EXPECT_NE(bad_tree.err.find("--spec-tree"), std::string::npos) << bad_tree.err;
  auto bad = run_tern("run -m " + m + " -p '' -n 4 --draft /nonexistent.gguf");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("draft"), std::string::npos) << bad.err;
  auto bad_k = run_tern("run -m " + m + " -p '' -n 4 --draft ngram --spec-k 40");
  EXPECT_NE(bad_k.exit_code, 0);
  EXPECT_NE(bad_k.err.find("--spec-k"), std::string::npos) << bad_k.err;
  // tern bench --draft: both engines, the same output, a JSON row per batch.
  auto bench = run_tern("bench -m " + m + " --draft " + m + " -n 16 -b 1,3 -r 1 -t 2 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("\"batch\": 3"), std::string::npos) << bench.out;
  EXPECT_EQ(bench.out.find("\"same_output\": false"), std::string::npos) << bench.out;
}

// tern bench -d: pp and tg again after each depth of cached positions, the
// tg roofline counting the KV bytes a token reads (stories260K: 5 layers,
// 4 KV heads of 8, f16: 640 bytes per position; tg4 runs at contexts
// depth+2 .. depth+5, mean depth+3.5).
TEST(Cli, BenchAtDepthsCountsKvBytes) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  auto o = run_tern("bench -m " + m + " -p 8 -n 4 -d 0,40 -r 1 -t 2 --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["depths"].size(), 2u) << o.out;
  EXPECT_EQ(j["kv_type"], "f16");
  const auto& d0 = j["depths"][0];
  const auto& d40 = j["depths"][1];
  EXPECT_EQ(d0["depth"], 0);
  EXPECT_EQ(d40["depth"], 40);
  EXPECT_DOUBLE_EQ(d0["kv_bytes_per_token"].get<double>(), 640 * 3.5);
  EXPECT_DOUBLE_EQ(d40["kv_bytes_per_token"].get<double>(), 640 * 43.5);
  EXPECT_GT(d40["tg"]["tok_s"].get<double>(), 0.0);
  EXPECT_GT(d40["pp"]["tok_s"].get<double>(), 0.0);
  EXPECT_EQ(d40["pp"]["tokens"], 8);
  // Reading more bytes per token lowers the roofline; the top-level pp/tg are the first depth's.
  EXPECT_LT(d40["roofline_tg_tok_s"].get<double>(), d0["roofline_tg_tok_s"].get<double>());
  EXPECT_LT(d0["roofline_tg_tok_s"].get<double>(), j["roofline_tg_tok_s"].get<double>());
  EXPECT_EQ(j["tg"]["tok_s"], d0["tg"]["tok_s"]);

  auto f32 = run_tern("bench -m " + m + " -p 0 -n 4 -d 40 -r 1 --kv-type f32 --json");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(f32.out)["depths"][0]["kv_bytes_per_token"].get<double>(), 1280 * 43.5);
  // q8_0: 5 layers x K and V x 4 heads x (8 int8 + a half scale) = 400 bytes a position.
  auto q8 = run_tern("bench -m " + m + " -p 0 -n 4 -d 40 -r 1 --kv-type q8_0 --json");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(q8.out)["depths"][0]["kv_bytes_per_token"].get<double>(), 400 * 43.5);
  EXPECT_EQ(nlohmann::json::parse(q8.out)["kv_type"], "q8_0");

  auto text = run_tern("bench -m " + m + " -p 8 -n 4 -d 0,40 -r 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("tg4 @ d40"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("weights+KV"), std::string::npos) << text.out;
  for (const char* bad : {"-d -1", "-d 1,,2", "--kv-type q8"}) {
    auto b = run_tern("bench -m " + m + " -p 8 -n 4 -r 1 " + std::string(bad));
    EXPECT_EQ(b.exit_code, 2) << bad << ": " << b.err;
  }
}

// tern bench --tune: pp under the defaults and each candidate activation
// block, the record written where TERN_TUNING says (directories made), then
// read by the next run; another CPU's or a malformed record is ignored with a
// line on stderr, and the run goes on with the defaults.
TEST(Cli, BenchTuneWritesTheRecordTheNextRunReads) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  const std::string dir = std::string(TERN_BINARY_DIR) + "/cli_tune." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string rec = dir + "/sub/tuning";
  const std::string env = "TERN_TUNING=" + test::shell_quote(rec);
  auto t = run_tern("bench -m " + m + " --tune -p 16 -r 1 --tune-rounds 1 -t 2 --json", env);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto j = nlohmann::json::parse(t.out)["tune"];
  EXPECT_EQ(j["path"], rec);
  EXPECT_EQ(j["n_prompt"], 16);
  ASSERT_GE(j["candidates"].size(), 2u);
  EXPECT_EQ(j["candidates"][0]["act_block_bytes"], 0);  // the defaults, the yardstick
  for (const auto& c : j["candidates"]) {
    ASSERT_EQ(c["pp_tok_s"].size(), 1u);
    EXPECT_GT(c["mean"].get<double>(), 0.0);
  }
  std::ifstream in(rec);
  ASSERT_TRUE(in) << "no record at " << rec;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\ncpu "), std::string::npos) << text;
  // A chosen block is recorded for the model's matrix type; the defaults leave no entry.
  const size_t best = j["best_act_block_bytes"].get<size_t>();
  EXPECT_EQ(text.find("act_block_bytes") != std::string::npos, best != 0) << text;
  EXPECT_FALSE(std::filesystem::exists(rec + ".tmp"));

  auto next = run_tern("bench -m " + m + " -p 8 -n 2 -r 1 --json", env);
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(nlohmann::json::parse(next.out)["tuning"], rec);
  EXPECT_EQ(next.err.find("ignoring"), std::string::npos) << next.err;

  for (const std::string& bad : {std::string("cpu Another CPU | AVX2\n"), std::string("cpu X\nprefetch 3\n")}) {
    std::ofstream(rec) << bad;
    auto o = run_tern("bench -m " + m + " -p 8 -n 2 -r 1 --json", env);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(nlohmann::json::parse(o.out)["tuning"], "");
    EXPECT_NE(o.err.find("ignoring the tuning record " + rec), std::string::npos) << o.err;
  }
  auto rounds = run_tern("bench -m " + m + " --tune --tune-rounds 0", env);
  EXPECT_EQ(rounds.exit_code, 2) << rounds.err;
  auto no_prompt = run_tern("bench -m " + m + " --tune -p 0", env);
  EXPECT_EQ(no_prompt.exit_code, 2) << no_prompt.err;
  std::filesystem::remove_all(dir);
}

TEST(Cli, GreedyIsDeterministicAndSeedReproducible) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  auto a = run_tern("run -m " + m + " -p 'Once upon a time' -n 40 --temp 0 -t 1");
  auto b = run_tern("run -m " + m + " -p 'Once upon a time' -n 40 --temp 0 -t 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
  auto s1 = run_tern("run -m " + m + " -p 'Once upon a time' -n 60 --temp 1 --seed 42");
  auto s2 = run_tern("run -m " + m + " -p 'Once upon a time' -n 60 --temp 1 --seed 42");
  auto s3 = run_tern("run -m " + m + " -p 'Once upon a time' -n 60 --temp 1 --seed 43");
  ASSERT_EQ(s1.exit_code, 0) << s1.err;
  EXPECT_EQ(s1.out, s2.out);
  EXPECT_NE(s1.out, s3.out);
}

TEST(Cli, EchoPrintsPromptThenContinuation) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  auto plain = run_tern("run -m " + m + " -p 'Lily went' -n 10 --temp 0");
  auto echo = run_tern("run -m " + m + " -p 'Lily went' -n 10 --temp 0 --echo");
  ASSERT_EQ(echo.exit_code, 0) << echo.err;
  EXPECT_EQ(echo.out, "Lily went" + plain.out);
}

TEST(Cli, TokenizeMatchesGoldenIds) {
  TERN_REQUIRE_STORIES();
  // The golden text's own tokenization (BOS + ids) is what the model generated.
  const std::string text_path = test::stories_dir() + "/expected_greedy_200steps.txt";
  auto o = run_tern("tokenize -m " + quote(test::stories_gguf()) + " -f " + quote(text_path));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::string want;
  for (int id : test::golden_ids()) want += (want.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(o.out, want + "\n");
  auto ns = run_tern("tokenize -m " + quote(test::stories_gguf()) + " -p 'Once upon' --no-special");
  EXPECT_EQ(ns.out, "403 407\n");
}

TEST(Cli, PerplexityJson) {
  TERN_REQUIRE_STORIES();
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  auto o = run_tern("perplexity -m " + quote(test::stories_gguf()) + " -f " + quote(text) + " -c 128 --chunks 4 --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  double ppl = 0;
  long long tokens = 0;
  int windows = 0;
  ASSERT_EQ(std::sscanf(o.out.c_str(), "{\"perplexity\": %lf, \"tokens\": %lld, \"windows\": %d}", &ppl, &tokens, &windows), 3)
      << o.out;
  EXPECT_EQ(windows, 4);
  EXPECT_EQ(tokens, 4 * (128 - 1 - 64));
  // A 260K-parameter model on its own domain: far better than uniform (512), far from perfect.
  EXPECT_GT(ppl, 1.5);
  EXPECT_LT(ppl, 30.0);
}

TEST(Cli, InfoListsMetadataAndTensors) {
  TERN_REQUIRE_STORIES();
  auto o = run_tern("info " + quote(test::stories_gguf()));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(o.out.find("\"llama\""), std::string::npos);
  EXPECT_NE(o.out.find("blk.4.ffn_down.weight"), std::string::npos);
  EXPECT_NE(o.out.find("[172, 64]"), std::string::npos);
}

TEST(Cli, ErrorsAreOneClearLineAndNonZero) {
  struct Case {
    std::string args;
    std::string needle;
  };
  const std::string m = test::stories_gguf().empty() ? "/nonexistent" : quote(test::stories_gguf());
  const Case cases[] = {
      {"", "usage"},
      {"frobnicate", "unknown command"},
      {"run -m /nonexistent/model.gguf -p hi", "cannot open"},
      {"run -p hi", "-m MODEL is required"},
      {"run -m " + m + " -p hi --bogus", "unknown option '--bogus'"},
      {"run -m " + m + " -p hi -n abc", "-n expects an integer"},
      {"run -m " + m + " -p hi --temp -1", "temperature"},
      {"run -m " + m + " -p hi -n", "needs a value"},
      {"info " + quote(std::string(TERN_SHARED_DIR) + "/data/text/wiki.test.raw"), "bad magic"},
      {"convert --from gguf", "unknown --from format"},
      {"tokenize -m " + m, "exactly one of"},
      {"perplexity -m " + m + " -f /nonexistent.txt", "cannot open"},
  };
  for (const auto& c : cases) {
    auto o = run_tern(c.args);
    EXPECT_NE(o.exit_code, 0) << c.args;
    EXPECT_NE(o.err.find(c.needle), std::string::npos) << c.args << " -> " << o.err;
    EXPECT_TRUE(o.out.empty()) << c.args;
  }
}

TEST(Cli, UnknownArchitectureIsRefused) {
  // A vocabulary-only GGUF has no model: `run` must say so, `tokenize` must work.
  const std::string vocab = std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-gpt-2.gguf";
  if (!std::ifstream(vocab)) GTEST_SKIP() << "tokenizer test vectors absent";
  auto o = run_tern("run -m " + quote(vocab) + " -p hi");
  EXPECT_NE(o.exit_code, 0);
  EXPECT_FALSE(o.err.empty());
  auto t = run_tern("tokenize -m " + quote(vocab) + " -p 'Hello world' --no-special");
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out, "15496 995\n");
}

// tern batch: results in input order, ids kept, bad lines reported without
// stopping the others, greedy text equal to the single-sequence path.
TEST(Cli, BatchRunsRequestsConcurrentlyAndReportsBadLines) {
  TERN_REQUIRE_STORIES();
  const std::string dir = std::string(TERN_BINARY_DIR) + "/cli_batch." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream in(dir + "/in.jsonl");
    in << R"({"id": "golden", "prompt": "", "max_tokens": 200, "temperature": 0})" << "\n"
       << R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "priority": 2})" << "\n"
       << "\n"  // blank lines are skipped
       << R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0.7, "seed": 5, "tenant": "b"})" << "\n"
       << "{not json\n"
       << R"({"prompt": "x", "max_tokens": "many"})" << "\n";
  }
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(dir + "/in.jsonl") + " -o " +
                    quote(dir + "/out.jsonl") + " --max-num-seqs 2 --policy priority --kv-memory 2M -t 2");
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_NE(o.err.find("batch: 5 requests (2 failed)"), std::string::npos) << o.err;
  std::ifstream out(dir + "/out.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  // The first line carries the golden greedy text (JSON-escaped), its id and figures.
  std::string golden_json;
  for (char c : test::golden_text()) {
    if (c == '\n') golden_json += "\\n";
    else if (c == '"') golden_json += "\\\"";
    else golden_json += c;
  }
  EXPECT_NE(lines[0].find("\"id\":\"golden\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"text\":\"" + golden_json + "\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"n_tokens_generated\":200"), std::string::npos);
  EXPECT_NE(lines[0].find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(lines[1].find("\"id\":1,"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("\"id\":3,"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], R"({"id":4,"error":"invalid JSON at byte 1: expected a string key"})");
  EXPECT_EQ(lines[4], R"({"id":5,"error":"\"max_tokens\" must be an integer, got \"many\""})");
  // Same greedy request through `tern run` gives the same text.
  auto r = run_tern("run -m " + quote(test::stories_gguf()) + " -p 'Once upon a time' -n 40 --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0);
  std::string run_json;
  for (char c : r.out) run_json += c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_NE(lines[1].find("\"text\":\"" + run_json + "\""), std::string::npos) << lines[1] << "\n" << r.out;

  auto usage = run_tern("batch -m " + quote(test::stories_gguf()));
  EXPECT_EQ(usage.exit_code, 2);
  auto bad_policy = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(dir + "/in.jsonl") +
                             " --policy lottery");
  EXPECT_NE(bad_policy.exit_code, 0);
  EXPECT_NE(bad_policy.err.find("lottery"), std::string::npos) << bad_policy.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// One generation path: `tern run` goes through the same engine as `tern
// batch`, so the same request (here sampled, seeded) gives the same text.
TEST(Cli, RunAndBatchGiveTheSameTextForTheSameRequest) {
  TERN_REQUIRE_STORIES();
  const std::string dir = std::string(TERN_BINARY_DIR) + "/cli_run_batch." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  for (const char* sampling : {R"("temperature": 0)", R"("temperature": 0.9, "seed": 7)"}) {
    SCOPED_TRACE(sampling);
    {
      std::ofstream in(dir + "/in.jsonl");
      in << R"({"id": 1, "prompt": "Once upon a time", "max_tokens": 60, )" << sampling << "}\n";
    }
    auto batch = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(dir + "/in.jsonl") + " -o " +
                          quote(dir + "/out.jsonl") + " --kv-type f32 -t 2");
    ASSERT_EQ(batch.exit_code, 0) << batch.err;
    std::ifstream out(dir + "/out.jsonl");
    std::string line;
    std::getline(out, line);
    const bool greedy = std::string(sampling).find("0.9") == std::string::npos;
    auto run = run_tern("run -m " + quote(test::stories_gguf()) + " -p 'Once upon a time' -n 60 -t 2 " +
                        (greedy ? "--temp 0" : "--temp 0.9 --seed 7"));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    ASSERT_FALSE(run.out.empty());
    std::string text_json;
    for (char c : run.out) {
      if (c == '\n') text_json += "\\n";
      else if (c == '"') text_json += "\\\"";
      else text_json += c;
    }
    EXPECT_NE(line.find("\"text\":\"" + text_json + "\""), std::string::npos) << line << "\nrun: " << run.out;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tern
