// The `tern` binary writing where writes fail: a full device, a file-size
// limit hit midway, a missing directory. Each must end in one clear error and
// a non-zero exit — never a silent loss or a half-written results file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using test::run_tern;
using test::ScratchDir;
using test::slurp;
std::string quote(const std::string& s) { return test::shell_quote(s); }

std::string tinystories() { return std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt"; }

TEST(CliOutput, WritingToAFullDeviceIsAnError) {
  TERN_REQUIRE_STORIES();
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ScratchDir dir("cli_full");
  std::ofstream(dir / "in.jsonl") << R"({"prompt": "Once", "max_tokens": 8, "temperature": 0})" << "\n";
  const std::string m = quote(test::stories_gguf());
  const std::vector<std::string> commands = {
      "run -m " + m + " -p Once -n 8 --temp 0",
      "run -m " + m + " -p Once -n 8 --temp 0 --echo",
      "tokenize -m " + m + " -p 'Once upon a time'",
      "info " + m,
      "batch -m " + m + " -f " + quote(dir / "in.jsonl") + " --kv-memory 8M",
      "perplexity -m " + m + " -f " + quote(tinystories()) + " -c 64 --chunks 1 --json",
  };
  for (const auto& c : commands) {
    auto o = run_tern(c + " >/dev/full");
    EXPECT_EQ(o.exit_code, 1) << c << "\n" << o.err;
    EXPECT_NE(o.err.find("tern: "), std::string::npos) << c << "\n" << o.err;
    EXPECT_NE(o.err.find("cannot write to standard output: No space left on device"), std::string::npos)
        << c << "\n" << o.err;
  }
}

// A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored so write() fails with
// EFBIG) makes the results file fail midway, like a full disk: the earlier
// results must stay as they were and no temporary file may be left.
TEST(CliOutput, BatchResultsAppearWholeOrNotAtAll) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_atomic");
  {
    std::ofstream in(dir / "in.jsonl");
    for (int i = 0; i < 30; ++i) in << R"({"prompt": "Once upon a time", "max_tokens": 100, "seed": )" << i << "}\n";
  }
  const std::string out = dir / "out.jsonl";
  const std::string args = "batch -m " + quote(test::stories_gguf()) + " -f " + quote(dir / "in.jsonl") + " -o " +
                           quote(out) + " --kv-memory 16M -t 2";
  // Control: unlimited, the run succeeds and its results exceed the limit used below.
  auto ok = run_tern(args);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  ASSERT_GT(std::filesystem::file_size(out), 8u * 1024);

  std::ofstream(out) << "earlier results\n";
  auto o = run_tern(args, "trap '' XFSZ; ulimit -f 8;");  // 8 blocks: 4 or 8 KiB by the shell's unit
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_NE(o.err.find("tern: batch: cannot write '" + out + "': File too large"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(out), "earlier results\n");
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

TEST(CliOutput, BatchResultsIntoAMissingDirectoryFailBeforeTheRun) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_nodir");
  std::ofstream(dir / "in.jsonl") << R"({"prompt": "Once", "max_tokens": 4})" << "\n";
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(dir / "in.jsonl") + " -o " +
                    quote(dir / "missing/out.jsonl"));
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_NE(o.err.find("cannot create '" + dir / "missing/out.jsonl.tmp" + "'"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("batch: 1 requests"), std::string::npos) << "ran before checking its output: " << o.err;
}

}  // namespace
}  // namespace tern
