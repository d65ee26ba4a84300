// Every file tern writes, written where the disk fills up at each possible
// moment (tests/cli/fault_steps.h): quantize, convert from llama2.c, saved
// logits, batch results and reports. Each failure point ends in one clear
// error and a non-zero exit, the earlier file stays as it was, and nothing
// half-written or temporary is left.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../model/model_fixture.h"
#include "cli/fault_steps.h"

namespace tern {
namespace {

using test::enumerate_write_faults;
using test::ScratchDir;
std::string quote(const std::string& s) { return test::shell_quote(s); }

TEST(CliFaults, QuantizeAndConvert) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("faults_files");
  const std::string out = dir / "out.gguf";
  // Header, tensor infos, one write per tensor, flush, fsync, close, rename: dozens of points.
  EXPECT_GT(enumerate_write_faults("quantize " + quote(test::stories_gguf()) + " " + quote(out) + " Q4_0", {out}), 20);
  const std::string s = test::stories_dir();
  EXPECT_GT(enumerate_write_faults("convert --from llama2c --model " + quote(s + "/stories260K.bin") + " --vocab " +
                                       quote(s + "/tok512.bin") + " -o " + quote(out),
                                   {out}),
            4);  // the converter writes its file in a few large pieces
}

TEST(CliFaults, LogitsBatchResultsAndReports) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("faults_results");
  const std::string m = quote(test::stories_gguf());
  const std::string text = quote(std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt");
  EXPECT_GT(enumerate_write_faults("perplexity -m " + m + " -f " + text + " -c 64 --chunks 2 --save-logits " +
                                       quote(dir / "base.bin"),
                                   {dir / "base.bin"}),
            4);
  std::ofstream(dir / "in.jsonl") << R"({"prompt": "Once", "max_tokens": 8, "temperature": 0})" << "\n"
                                  << R"({"prompt": [1, 2], "max_tokens": 4})" << "\n";
  EXPECT_GT(enumerate_write_faults("batch -m " + m + " -f " + quote(dir / "in.jsonl") + " --kv-memory 8M -o " +
                                       quote(dir / "out.jsonl"),
                                   {dir / "out.jsonl"}),
            4);
  const test::TernOutput b = test::run_tern("bench -m " + m + " -p 8 -n 4 -r 1 -t 1 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::ofstream(dir / "bench.json") << b.out;
  EXPECT_GT(enumerate_write_faults("report " + quote(dir / "bench.json") + " -o " + quote(dir / "REPORT.md"),
                                   {dir / "REPORT.md"}),
            4);
}

}  // namespace
}  // namespace tern
