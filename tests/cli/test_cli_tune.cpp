// tern tune against real `tern serve` processes on stories260K: every
// configuration of the grid is measured or left out with its server's error,
// successive halving keeps the better half, the table marks one best and a
// Pareto front, and the file it writes is what `tern serve --config` reads
// (the model path comes from it; the command line overrides its flags).
// `tern serve --config` refuses bad files naming them.
#include <gtest/gtest.h>

#include <string>

#include "../core/file_test_util.h"
#include "../model/model_fixture.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using test::run_tern;
using test::ScratchDir;
using test::slurp;
using test::write_lines;

std::string quote(const std::string& s) { return test::shell_quote(s); }

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliTune, SearchesTheGridAndWritesAConfigServeReads) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir;
  const std::string m = test::stories_gguf(), conf = dir / "best.conf";
  // kv=bogus: a server that refuses its flags is left out, with its message.
  auto o = run_tern("tune -m " + quote(m) + " --dataset random:16,8 -n 2 --max-num-seqs 1,4 --kv-type f16,bogus "
                    "--ignore-eos --serve-args '--kv-memory 64M -t 1' -o " + quote(conf),
                    "timeout 300");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("| configuration | rounds | requests | goodput req/s"), std::string::npos) << o.out;
  // Four configurations, two rounds: both f16 ones measured in round 1, one of them in round 2.
  EXPECT_NE(o.out.find("| seqs=1 kv=f16"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("| seqs=4 kv=f16"), std::string::npos) << o.out;
  EXPECT_EQ(count(o.out, "left out:"), 2u) << o.out;
  EXPECT_NE(o.out.find("kv=bogus | - | - | left out:"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--kv-type"), std::string::npos) << o.out;  // the server's own message
  EXPECT_EQ(count(o.out, "**(best)** | 2 | 4 |"), 1u) << o.out;
  EXPECT_EQ(count(o.err, "tune: round 2/2"), 1u) << o.err;
  EXPECT_GE(count(o.out, " | yes |"), 1u) << o.out;

  const std::string text = slurp(conf);
  EXPECT_NE(text.find("-m " + m + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--kv-memory 64M -t 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--kv-type f16\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--max-num-seqs "), std::string::npos) << text;

  // serve takes the model from the file; the command line's --kv-memory wins
  // over the file's (and is refused: the process ends, so the test needs no server).
  auto serve = run_tern("serve --config " + quote(conf) + " --port 0 --kv-memory 100000G", "timeout 60");
  EXPECT_EQ(serve.exit_code, 1) << serve.err;
  EXPECT_NE(serve.err.find("a KV pool of --kv-memory (100000.00 GiB) is more than the"), std::string::npos) << serve.err;
}

TEST(CliTune, RefusesWhatItCannotRun) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir;
  const std::string m = quote(test::stories_gguf()), out = " -o " + quote(dir / "t.conf");
  auto no_model = run_tern("tune --dataset random:8,4 -n 1" + out);
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.err.find("-m MODEL is required"), std::string::npos) << no_model.err;
  auto bad_value = run_tern("tune -m " + m + " --dataset random:8,4 -n 1 --max-num-seqs 4,0" + out);
  EXPECT_EQ(bad_value.exit_code, 2);
  EXPECT_NE(bad_value.err.find("--max-num-seqs '0' is not a whole number"), std::string::npos) << bad_value.err;
  auto too_many = run_tern("tune -m " + m + " --dataset random:8,4 -n 1 --threads 1,2,3,4,5,6,7,8 "
                           "--max-num-seqs 1,2,3,4,5,6 --max-batched-tokens 64,128,256,512,1024,2048" + out);
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.err.find("288 configurations: at most 256"), std::string::npos) << too_many.err;
  auto no_data = run_tern("tune -m " + m + " -n 1" + out);
  EXPECT_EQ(no_data.exit_code, 2);
  EXPECT_NE(no_data.err.find("--dataset is required"), std::string::npos) << no_data.err;
  // Every server refuses: nothing to choose, nothing written.
  auto none = run_tern("tune -m " + m + " --dataset random:8,4 -n 1 --kv-type bogus,nonsense" + out, "timeout 120");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("no configuration could serve the workload"), std::string::npos) << none.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.conf"));
}

TEST(CliServeConfig, BadFilesAreRefusedNamingThem) {
  TERN_REQUIRE_STORIES();
  ScratchDir dir;
  const std::string m = quote(test::stories_gguf());
  auto missing = run_tern("serve --config " + quote(dir / "nope.conf") + " --port 0");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nope.conf"), std::string::npos) << missing.err;
  const std::string unknown = write_lines(dir / "unknown.conf", {"# a comment", "-m " + test::stories_gguf(), "--bogus 1"});
  auto u = run_tern("serve --config " + quote(unknown) + " --port 0");
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_NE(u.err.find("--config " + unknown), std::string::npos) << u.err;
  EXPECT_NE(u.err.find("unknown option '--bogus'"), std::string::npos) << u.err;
  const std::string nested = write_lines(dir / "nested.conf", {"--config other.conf"});
  auto n = run_tern("serve -m " + m + " --config " + quote(nested) + " --port 0");
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_NE(n.err.find("cannot name another"), std::string::npos) << n.err;
  const std::string open_quote = write_lines(dir / "quote.conf", {"-m x", "--served-model-name \"a b"});
  auto q = run_tern("serve --config " + quote(open_quote) + " --port 0");
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_NE(q.err.find("line 2: unterminated quote"), std::string::npos) << q.err;
  auto twice = run_tern("serve --config " + quote(nested) + " --config " + quote(unknown));
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("--config given twice"), std::string::npos) << twice.err;
}

}  // namespace
}  // namespace tern
