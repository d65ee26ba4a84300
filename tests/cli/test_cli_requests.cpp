// The `tern` binary given values that only look valid: request lines with
// non-integer token ids or empty stop strings, an empty API key. Each must be
// a clear error, not a silent wrap-around or a server without authentication.
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
using test::write_lines;
std::string quote(const std::string& s) { return test::shell_quote(s); }

TEST(CliRequests, BatchRejectsNonIntegerTokenIdsAndEmptyStops) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir("cli_json");
  const std::string in = write_lines(
      dir / "in.jsonl",
      {R"({"prompt": [1, 1.7], "max_tokens": 2})", R"({"prompt": [1e10], "max_tokens": 2})",
       R"({"prompt": [10000000000], "max_tokens": 2})", R"({"prompt": [-1], "max_tokens": 2})",
       R"({"prompt": "x", "stop": [""]})", R"({"prompt": "x", "stop": ""})", R"({"prompt": "x", "max_tokens": 1.5})",
       R"({"prompt": "x", "max_tokens": 1e10})", R"({"prompt": "x", "seed": -3})",
       R"({"prompt": [1, 403], "max_tokens": 2, "stop": ["!"]})"});
  auto o = run_tern("batch -m " + quote(test::stories_gguf()) + " -f " + quote(in) + " --kv-memory 8M");
  EXPECT_EQ(o.exit_code, 1) << o.err;
  std::vector<std::string> lines;
  for (size_t b = 0, e; (e = o.out.find('\n', b)) != std::string::npos; b = e + 1) lines.push_back(o.out.substr(b, e - b));
  ASSERT_EQ(lines.size(), 10u) << o.out;
  const std::vector<std::string> want = {
      R"j({"id":0,"error":"\"prompt\"[1] = 1.7 is not a token id (an integer >= 0)"})j",
      R"j({"id":1,"error":"\"prompt\"[0] = 10000000000.0 is not a token id (an integer >= 0)"})j",
      R"j({"id":2,"error":"\"prompt\"[0] = 10000000000 is not a token id (an integer >= 0)"})j",
      R"j({"id":3,"error":"\"prompt\"[0] = -1 is not a token id (an integer >= 0)"})j",
      R"j({"id":4,"error":"\"stop\" strings must not be empty (an empty stop would end every request at once)"})j",
      R"j({"id":5,"error":"\"stop\" strings must not be empty (an empty stop would end every request at once)"})j",
      R"j({"id":6,"error":"\"max_tokens\" must be an integer, got 1.5"})j",
      R"j({"id":7,"error":"\"max_tokens\" must be an integer, got 10000000000.0"})j",
      R"j({"id":8,"error":"\"seed\" must be an integer >= 0, got -3"})j",
  };
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(lines[i], want[i]);
  EXPECT_NE(lines[9].find("\"n_tokens_prompt\":2"), std::string::npos) << lines[9];
  EXPECT_EQ(lines[9].find("error"), std::string::npos) << lines[9];
}

TEST(CliRequests, ServeRefusesAnEmptyApiKey) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  auto empty = run_tern("serve -m " + m + " --port 0 --api-key ''", "timeout 20");
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("tern: serve: --api-key is empty"), std::string::npos) << empty.err;
  ScratchDir dir("cli_keydir");
  auto d = run_tern("serve -m " + m + " --port 0 --api-key-file " + quote(dir.path), "timeout 20");
  EXPECT_EQ(d.exit_code, 1) << d.err;
  EXPECT_NE(d.err.find("tern: serve: --api-key-file: '" + dir.path + "' is a directory, not a regular file"),
            std::string::npos)
      << d.err;
}

}  // namespace
}  // namespace tern
