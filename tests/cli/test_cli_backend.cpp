// `--backend cpu|ref` end to end: the scalar reference backend behind the real
// `tern` binary gives the CPU backend's answers, and a backend name that does
// not exist is a usage error on every command that takes the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using test::run_tern;
using test::ScratchDir;
using test::write_lines;
std::string quote(const std::string& s) { return test::shell_quote(s); }

TEST(CliBackend, RefRunPrintsGoldenText) {
  TERN_REQUIRE_STORIES();
  auto o = run_tern("run -m " + quote(test::stories_gguf()) + " -p '' -n 200 --temp 0 --backend ref");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, test::golden_text());
}

double perplexity(const std::string& backend) {
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  auto o = run_tern("perplexity -m " + quote(test::stories_gguf()) + " -f " + quote(text) +
                    " -c 128 --chunks 4 --json -t 2 --backend " + backend);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  double ppl = 0;
  long long tokens = 0;
  int windows = 0;
  EXPECT_EQ(std::sscanf(o.out.c_str(), "{\"perplexity\": %lf, \"tokens\": %lld, \"windows\": %d}", &ppl, &tokens, &windows), 3)
      << o.out;
  EXPECT_EQ(tokens, 4 * (128 - 1 - 64));
  return ppl;
}

// Perplexity is exp(mean NLL) over 252 scored tokens; each token's NLL moves
// by at most twice its largest logit difference (<= 2e-4 between the backends,
// tests/backend), so the ratio is within e^4e-4 - 1 = 4e-4 in the worst case.
// Measured: the same value to the JSON's 6 decimals (< 1.3e-7 relative on a
// perplexity of 3.86). kPplRel = 2e-5 sits between the two, far below what
// any real difference does (another model, a wrong op: > 1%).
constexpr double kPplRel = 2e-5;

TEST(CliBackend, RefPerplexityEqualsCpu) {
  TERN_REQUIRE_STORIES();
  const double cpu = perplexity("cpu"), ref = perplexity("ref");
  ASSERT_GT(cpu, 1.0);
  EXPECT_LT(std::fabs(ref / cpu - 1.0), kPplRel) << "cpu " << cpu << " ref " << ref;
}

TEST(CliBackend, RefBenchRuns) {
  TERN_REQUIRE_STORIES();
  auto o = run_tern("bench -m " + quote(test::stories_gguf()) + " --backend ref -p 16 -n 4 -r 1 --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("\"pp\": {\"tokens\": 16"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"tg\": {\"tokens\": 4"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"threads\": 1"), std::string::npos) << "the reference runs on one thread: " << o.out;
}

TEST(CliBackend, UnknownBackendIsAUsageErrorNamingTheChoices) {
  const std::string m = test::stories_gguf().empty() ? "/nonexistent" : quote(test::stories_gguf());
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  ScratchDir dir("cli_backend");
  const std::string requests = write_lines(dir / "in.jsonl", {R"({"prompt": "Once", "max_tokens": 2})"});
  // serve used to open its port (and say so) before the engine refused the name, and exit 1.
  for (const std::string& cmd : {"run -m " + m + " -p hi -n 2", "bench -m " + m + " -p 4 -n 2 -r 1",
                                 "perplexity -m " + m + " -f " + quote(text) + " -c 64 --chunks 1",
                                 "batch -m " + m + " -f " + quote(requests), "serve -m " + m + " --port 0"}) {
    SCOPED_TRACE(cmd);
    auto o = run_tern(cmd + " --backend nope", "timeout 60");
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("'nope'"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("cpu"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("ref"), std::string::npos) << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;
    EXPECT_EQ(o.err.find("listening"), std::string::npos) << o.err;
  }
}

}  // namespace
}  // namespace tern
