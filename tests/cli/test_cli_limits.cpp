// The `tern` binary asked for more than the machine has: KV memory and
// contexts past available memory or past the KV pool, an address-space limit.
// Each must be a clear error naming the sizes, not an abort or an assertion.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"
#include "core/memory_info.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TERN_TEST_SANITIZED 1  // sanitizers reserve terabytes of shadow memory: `ulimit -v` stops them at start
#endif

namespace tern {
namespace {

using test::run_tern;
using test::ScratchDir;
using test::write_lines;
std::string quote(const std::string& s) { return test::shell_quote(s); }

// stories260K's KV cache takes 1280 bytes per position (5 layers, K and V, 32
// f32 values): -c 99999999 asks for ~119 GiB.
TEST(CliLimits, RunContextPastAvailableMemoryIsAnError) {
  TERN_REQUIRE_STORIES();
  if (available_memory_bytes() > (int64_t{119} << 30)) GTEST_SKIP() << "this machine could hold the KV cache";
  auto o = run_tern("run -m " + quote(test::stories_gguf()) + " -p hi -n 4 -c 99999999");
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("tern: a KV cache for a context of 99999999 tokens (119.21 GiB) is more than the"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("of memory available now (MemAvailable); lower the context size (-c)"), std::string::npos)
      << o.err;
  // Past the training context (512) is a warning, not a refusal.
  EXPECT_NE(o.err.find("context of 99999999 tokens is past the 512 the model was trained on"), std::string::npos)
      << o.err;
  EXPECT_TRUE(o.out.empty());
}

TEST(CliLimits, ContextPastTrainingLengthWarnsAndRuns) {
  TERN_REQUIRE_STORIES();
  auto o = run_tern("run -m " + quote(test::stories_gguf()) + " -p hi -n 4 --temp 0 -c 1024");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("context of 1024 tokens is past the 512 the model was trained on"), std::string::npos) << o.err;
  auto quiet = run_tern("run -m " + quote(test::stories_gguf()) + " -p hi -n 4 --temp 0 -c 512");
  EXPECT_EQ(quiet.err.find("past the"), std::string::npos) << quiet.err;
}

TEST(CliLimits, BatchContextMustFitOneSequenceInTheKvPool) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_ctx");
  const std::string in = write_lines(dir / "in.jsonl", {R"({"prompt": "Once", "max_tokens": 4})"});
  // f16 KV: 640 bytes per position, 10 KiB per 16-token block; 64M holds 6553 blocks.
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(in) + " --kv-memory 64M -c 99999999");
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("tern: a context of 99999999 tokens needs 6250000 KV blocks (59.60 GiB) but the pool holds "
                       "6553 (63.99 MiB), not even one sequence; lower -c or raise --kv-memory"),
            std::string::npos)
      << o.err;
  auto fits = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(in) + " --kv-memory 64M -c 100000");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
}

TEST(CliLimits, KvMemoryPastAvailableMemoryIsRefused) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_kvmem");
  const std::string in = write_lines(dir / "in.jsonl", {R"({"prompt": "Once", "max_tokens": 4})"});
  const std::string m = quote(test::stories_gguf());
  const std::string want = "a KV pool of --kv-memory (100000.00 GiB) is more than the";
  auto batch = run_tern("batch -m " + m + " -f " + quote(in) + " --kv-memory 100000G", "timeout 60");
  EXPECT_EQ(batch.exit_code, 2) << batch.err;
  EXPECT_NE(batch.err.find(want), std::string::npos) << batch.err;
  // serve binds first, then loads: the refusal must end the process, not leave it serving.
  auto serve = run_tern("serve -m " + m + " --port 0 --kv-memory 100000G", "timeout 60");
  EXPECT_EQ(serve.exit_code, 1) << serve.err;
  EXPECT_NE(serve.err.find(want), std::string::npos) << serve.err;
}

// Under an address-space limit the KV allocation fails for real: a Status, not
// std::bad_alloc (exit 134) or a failed assertion. (If the machine has less
// than the asked memory free, the up-front check refuses first: also fine.)
TEST(CliLimits, AddressSpaceLimitGivesAnErrorNotACrash) {
#ifdef TERN_TEST_SANITIZED
  GTEST_SKIP() << "sanitized build";
#endif
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_ulimit");
  const std::string in = write_lines(dir / "in.jsonl", {R"({"prompt": "Once", "max_tokens": 4})"});
  const std::string m = quote(test::stories_gguf());
  const std::string limit = "ulimit -v 1000000;";  // ~1 GB
  auto control = run_tern("run -m " + m + " -p hi -n 4 --temp 0", limit);
  ASSERT_EQ(control.exit_code, 0) << control.err;

  auto run = run_tern("run -m " + m + " -p hi -n 4 -c 4000000", limit);  // 4.77 GiB of KV
  EXPECT_TRUE(run.exit_code == 1 || run.exit_code == 2) << run.exit_code << " " << run.err;
  EXPECT_TRUE(run.err.find("cannot map a KV pool of 4.77 GiB") != std::string::npos ||
              run.err.find("MemAvailable") != std::string::npos)
      << run.err;
  auto batch = run_tern("batch -m " + m + " -f " + quote(in) + " --kv-memory 4G", limit);
  EXPECT_TRUE(batch.exit_code == 1 || batch.exit_code == 2) << batch.exit_code << " " << batch.err;
  EXPECT_TRUE(batch.err.find("cannot map a KV pool of 4.00 GiB") != std::string::npos ||
              batch.err.find("MemAvailable") != std::string::npos)
      << batch.err;
}

}  // namespace
}  // namespace tern
