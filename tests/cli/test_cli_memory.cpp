// Small-memory operation from the command line: --no-mmap, --cold (the file
// dropped from the page cache first) and --mlock give the golden text, --mlock under a small locked-memory limit is refused with the
// limit, and --max-rss keeps a batch's peak resident memory under the bound
// (the KV cache sized to what is left, requests waiting for room; without it
// the same batch goes over).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"
#include "sanitized.h"

namespace tern {
namespace {

using test::run_tern;

std::string quote(const std::string& s) { return test::shell_quote(s); }

TEST(CliMemory, NoMmapColdAndMlockGiveTheGoldenText) {
  TERN_REQUIRE_STORIES();
  const std::string run = "run -m " + quote(test::stories_gguf()) + " -p '' -n 200 --temp 0 -t 2";
  auto read = run_tern(run + " --no-mmap");
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, test::golden_text());
  // --cold: the file dropped from the page cache first, and the figures said.
  auto cold = run_tern(run + " --cold");
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  EXPECT_EQ(cold.out, test::golden_text());
  EXPECT_NE(cold.err.find("of the model file was in the page cache"), std::string::npos) << cold.err;
  EXPECT_NE(cold.err.find("first token"), std::string::npos) << cold.err;
  EXPECT_NE(cold.err.find("peak resident memory"), std::string::npos) << cold.err;
  auto locked = run_tern(run + " --mlock", "TERN_LOG_LEVEL=info");
  if (locked.exit_code != 0) {  // a locked-memory limit below the model: refused, saying so
    EXPECT_NE(locked.err.find("ulimit -l"), std::string::npos) << locked.err;
  } else {
    EXPECT_EQ(locked.out, test::golden_text());
    EXPECT_NE(locked.err.find("of weights locked in memory"), std::string::npos) << locked.err;
  }
}

TEST(CliMemory, MlockUnderASmallLimitIsRefusedWithTheLimit) {
  TERN_REQUIRE_STORIES();
  if (test::kSanitized) GTEST_SKIP() << "AddressSanitizer's mlock interceptor does nothing and succeeds";
  // Root may lock past any limit (CAP_IPC_LOCK): run as nobody, without capabilities.
  const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all " : "";
  if (!as_user.empty() && std::system("command -v setpriv > /dev/null") != 0) GTEST_SKIP() << "no setpriv to drop root";
  auto o = run_tern("run -m " + quote(test::stories_gguf()) + " -p x -n 3 --mlock",
                    "prlimit --memlock=4096:4096 " + as_user);
  if (o.err.find("ermission denied") != std::string::npos) GTEST_SKIP() << "the model is not readable as nobody: " << o.err;
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("the limit on locked memory is 4.0 KiB; raise it with `ulimit -l`"), std::string::npos) << o.err;
}

// KV-heavy and cheap to run: 16 layers of width 64 keep 8 KiB of f32 K/V per token; 1.4 MiB of weights.
void make_kv_heavy_model(const std::string& path) {
  auto synth = run_tern("synth --arch llama --dim 64 --layers 16 --heads 1 --kv-heads 1 --ffn 128 --type F16 --ctx 1024 "
                        "--vocab-from " + quote(test::stories_gguf()) + " -o " + quote(path));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
}

// n prompts of ~770 distinct tokens, 60 more tokens each (~6.5 MiB of f32 K/V per request on that model).
void write_prompts(const std::string& path, int n) {
  std::ofstream f(path);
  std::string body;
  for (int i = 0; i < 40; ++i) body += "Once upon a time there was a little girl who liked to play. ";
  for (int i = 0; i < n; ++i)
    f << nlohmann::json{{"id", i}, {"prompt", "number " + std::to_string(i) + ". " + body}, {"max_tokens", 60},
                        {"temperature", 0}, {"ignore_eos", true}}
             .dump()
      << "\n";
}

TEST(CliMemory, MaxRssKeepsABatchUnderTheBound) {
  TERN_REQUIRE_STORIES();
  // A sanitizer's own memory (shadow, quarantine) is in the resident set it would measure.
  if (test::kSanitized) GTEST_SKIP() << "resident memory under a sanitizer is the sanitizer's";
  test::ScratchDir dir;
  const std::string model = dir / "kv_heavy.gguf", in = dir / "in.jsonl";
  make_kv_heavy_model(model);
  if (HasFatalFailure()) return;
  // 6 prompts of ~770 distinct tokens and 60 more each: ~39 MiB of K/V when all run at once.
  write_prompts(in, 6);
  const auto batch = [&](const std::string& extra) {
    const std::string stats = dir / "stats.json";
    auto o = run_tern("batch -m " + quote(model) + " -f " + quote(in) + " -o " + quote(dir / "out.jsonl") +
                      " --stats-json " + quote(stats) + " -t 2 --kv-type f32 " + extra);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    std::ifstream f(stats);
    return nlohmann::json::parse(f, nullptr, false);
  };
  const int64_t bound = int64_t{40} << 20;
  const auto bounded = batch("--max-rss 40M");
  ASSERT_FALSE(bounded.is_discarded());
  EXPECT_EQ(bounded["failed"], 0);
  EXPECT_LE(bounded["rss_peak_bytes"].get<int64_t>(), bound);
  EXPECT_LE(bounded["kv_blocks_total"].get<int64_t>() * bounded["kv_block_bytes"].get<int64_t>(), bound / 2);
  EXPECT_LT(bounded["running_peak"].get<int>(), 6) << "the bound was meant to make requests wait for KV room";
  const auto free_run = batch("");
  ASSERT_FALSE(free_run.is_discarded());
  EXPECT_GT(free_run["rss_peak_bytes"].get<int64_t>(), bound) << "unbounded, the batch must need more than the bound";
  EXPECT_EQ(free_run["running_peak"], 6);
  // Too small a bound is refused with its figures (`tern run` keeps f32 K/V: 8 MiB for the context).
  auto tiny = run_tern("run -m " + quote(model) + " -p x -n 3 --max-rss 20M");
  EXPECT_NE(tiny.exit_code, 0);
  EXPECT_NE(tiny.err.find("--max-rss 20.00 MiB leaves"), std::string::npos) << tiny.err;
  EXPECT_NE(tiny.err.find("less than one sequence's context of 1024 tokens (8.00 MiB)"), std::string::npos) << tiny.err;
  auto fraction = run_tern("run -m " + quote(model) + " -p x -n 3 --max-rss 0.5");
  EXPECT_NE(fraction.err.find("--max-rss '0.5': expected bytes (4G, 512M)"), std::string::npos) << fraction.err;
}


// In a memory cgroup the kernel enforces the bound (scripts/cgroup_run.sh;
// skipped where no writable memory cgroup exists): a batch of 12 long
// requests is killed at 40 MiB without --max-rss, and completes inside it
// with --max-rss 40M (the KV pool sized to what is left; requests wait).
TEST(CliMemory, MaxRssRunsInAMemoryCgroupWhereTheUnboundedBatchIsKilled) {
  TERN_REQUIRE_STORIES();
  if (test::kSanitized) GTEST_SKIP() << "a sanitizer's shadow memory would be charged to the cgroup";
  test::ScratchDir dir;
  const std::string model = dir / "kv_heavy.gguf", in = dir / "in.jsonl", out = dir / "out.jsonl";
  make_kv_heavy_model(model);
  if (HasFatalFailure()) return;
  write_prompts(in, 12);  // ~78 MiB of K/V if all ran at once
  const std::string script =
      (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "scripts" / "cgroup_run.sh").string();
  constexpr int64_t kLimit = int64_t{40} << 20;
  const std::string prefix = "bash " + quote(script) + " " + std::to_string(kLimit);
  const std::string args = "batch -m " + quote(model) + " -f " + quote(in) + " -o " + quote(out) + " -t 2 --kv-type f32";
  auto bounded = run_tern(args + " --max-rss 40M", prefix);
  if (bounded.exit_code == 77) GTEST_SKIP() << bounded.err;
  EXPECT_EQ(bounded.exit_code, 0) << bounded.err;
  EXPECT_NE(bounded.err.find("oom_kills 0"), std::string::npos) << bounded.err;
  std::ifstream f(out);
  int finished = 0;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    finished += j.value("finish_reason", "") == "length" ? 1 : 0;
  }
  EXPECT_EQ(finished, 12);
  // The cgroup's charged peak (anonymous memory and the page cache it brought in) within the limit.
  const size_t at = bounded.err.rfind("cgroup_run: limit ");
  ASSERT_NE(at, std::string::npos) << bounded.err;
  long long limit = 0, peak = 0;
  ASSERT_EQ(std::sscanf(bounded.err.c_str() + at, "cgroup_run: limit %lld peak %lld", &limit, &peak), 2) << bounded.err;
  EXPECT_EQ(limit, kLimit);
  EXPECT_LE(peak, kLimit);
  auto unbounded = run_tern(args, prefix);
  EXPECT_EQ(unbounded.exit_code, 137) << "without --max-rss the batch must outgrow the cgroup: " << unbounded.err;
  EXPECT_NE(unbounded.err.find("oom_kills 1"), std::string::npos) << unbounded.err;
}

}  // namespace
}  // namespace tern
