// The `tern` binary given hostile input paths: FIFOs, directories, endless
// devices and oversized files must each end in one clear error and a non-zero
// exit, fast — never a hang, an empty read or an abort.
#include <gtest/gtest.h>
#include <sys/stat.h>
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
std::string quote(const std::string& s) { return test::shell_quote(s); }

std::string tinystories() { return std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt"; }

// Each command that takes a path, given a FIFO (open() would wait for a
// writer forever), a directory (reads as empty), or an endless device. The
// timeout turns a hang into exit 124, which the test rejects.
TEST(CliInputs, NonRegularFilesAreRefusedAtOnce) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_special");
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string m = quote(test::stories_gguf());
  struct Case {
    std::string path, kind;
  };
  const std::vector<Case> cases = {
      {fifo, "is a FIFO (named pipe)"}, {dir.path, "is a directory"}, {"/dev/zero", "is a character device"},
      {"/dev/urandom", "is a character device"}};
  for (const auto& c : cases) {
    if (!std::filesystem::exists(c.path)) continue;
    const std::string p = quote(c.path);
    for (const std::string& args :
         {"run -m " + m + " -f " + p, "tokenize -m " + m + " -f " + p, "perplexity -m " + m + " -f " + p,
          "batch -m " + m + " -f " + p, "run -m " + p + " -p hi", "info " + p, "tokenize -m " + p + " -p hi",
          "batch -m " + p + " -f " + quote(tinystories()), "quantize " + p + " " + quote(dir / "q.gguf") + " Q8_0",
          "serve -m " + m + " --port 0 --api-key-file " + p}) {
      auto o = run_tern(args, "timeout 20");
      EXPECT_NE(o.exit_code, 124) << "hung: " << args;
      EXPECT_NE(o.exit_code, 0) << args;
      EXPECT_NE(o.err.find("'" + c.path + "' " + c.kind + ", not a regular file"), std::string::npos)
          << args << "\n" << o.err;
    }
  }
}

TEST(CliInputs, TextFilesPastTheSizeLimitAreRefused) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_big");
  const std::string big = dir / "big.txt";
  std::ofstream(big).put('x');
  std::filesystem::resize_file(big, (uint64_t{1} << 30) + 1);  // sparse: no disk used
  const std::string m = quote(test::stories_gguf());
  for (const std::string& args : {"run -m " + m + " -f " + quote(big), "tokenize -m " + m + " -f " + quote(big),
                                  "perplexity -m " + m + " -f " + quote(big), "batch -m " + m + " -f " + quote(big)}) {
    auto o = run_tern(args, "timeout 20");
    EXPECT_EQ(o.exit_code, 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find("'" + big + "' is larger than the 1.00 GiB tern reads from an input file"), std::string::npos)
        << args << "\n" << o.err;
  }
  // Control: the same file, small, is read.
  std::filesystem::resize_file(big, 64);
  auto o = run_tern("tokenize -m " + m + " -f " + quote(big));
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

}  // namespace
}  // namespace tern
