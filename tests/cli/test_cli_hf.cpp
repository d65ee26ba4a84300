// `tern` on a Hugging Face directory: stories260K written as an HF checkpoint
// (config.json, model.safetensors with llama's Q/K rows in rotate-half order,
// tokenizer.json and tokenizer_config.json from its vocabulary) runs directly
// with `tern run -m DIR` and through `tern convert --from hf`, and both print
// llama2.c's golden text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../model/hf_writer.h"
#include "../model/model_fixture.h"
#include "../tokenizer/hf_json_writer.h"
#include "cli/fault_steps.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using test::run_tern;
std::string quote(const std::string& s) { return test::shell_quote(s); }

// The stories model as an HF directory (removed at exit of the test).
struct StoriesHfDir {
  std::string dir;
  explicit StoriesHfDir(const std::string& name) {
    auto g = gguf::GgufFile::open(test::stories_gguf());
    EXPECT_TRUE(g.is_ok());
    test::SynthSpec spec;
    test::SyntheticModel sm = test::synthetic_from_gguf(*g, spec);
    dir = test::fresh_dir(name);
    test::write_hf_dir(sm, spec, dir);
    std::ofstream(dir + "/tokenizer.json") << test::tokenizer_json_from_gguf(*g, {}).dump(1);
    std::ofstream(dir + "/tokenizer_config.json") << test::tokenizer_config_from_gguf(*g).dump(1);
  }
  ~StoriesHfDir() { std::filesystem::remove_all(dir); }
};

TEST(CliHf, RunFromDirectoryAndFromItsConversionPrintGoldenText) {
  TERN_REQUIRE_STORIES();
  StoriesHfDir hf("cli_run");
  auto direct = run_tern("run -m " + quote(hf.dir) + " -p '' -n 200 --temp 0 -t 2");
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(direct.out, test::golden_text());

  const std::string out = hf.dir + ".gguf";
  auto conv = run_tern("convert --from hf " + quote(hf.dir) + " -o " + quote(out) + " --type F32 -t 2");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  EXPECT_NE(conv.err.find("GB/s"), std::string::npos) << conv.err;
  EXPECT_NE(conv.err.find("100%"), std::string::npos) << "progress lines when stderr is not a terminal: " << conv.err;
  auto converted = run_tern("run -m " + quote(out) + " -p '' -n 200 --temp 0 -t 2");
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  EXPECT_EQ(converted.out, test::golden_text());

  // Quantized on the way: Q8_0 matrices, still a working model.
  auto q8 = run_tern("convert --from hf " + quote(hf.dir) + " -o " + quote(out) + " --type Q8_0 -t 2");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  auto info = run_tern("info " + quote(out));
  EXPECT_NE(info.out.find("Q8_0"), std::string::npos);
  std::filesystem::remove(out);
}

// The streaming converter where the disk fills up at each possible moment
// (tests/cli/fault_steps.h): one clear error, the earlier file untouched,
// nothing temporary left.
TEST(CliHf, ConvertSurvivesAFullDiskAtEveryWrite) {
  TERN_REQUIRE_STORIES();
  StoriesHfDir hf("cli_faults");
  test::ScratchDir out_dir("cli_hf_faults");
  const std::string out = out_dir / "out.gguf";
  EXPECT_GT(test::enumerate_write_faults("convert --from hf " + quote(hf.dir) + " -o " + quote(out) + " --type Q8_0 -t 2",
                                         {out}),
            20);
}

TEST(CliHf, InfoAndTokenizeReadTheDirectory) {
  TERN_REQUIRE_STORIES();
  StoriesHfDir hf("cli_info");
  auto info = run_tern("info " + quote(hf.dir));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(info.out.find("tokenizer.ggml.tokens"), std::string::npos);
  auto from_dir = run_tern("tokenize -m " + quote(hf.dir) + " -p 'Once upon a time'");
  auto from_gguf = run_tern("tokenize -m " + quote(test::stories_gguf()) + " -p 'Once upon a time'");
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  EXPECT_EQ(from_dir.out, from_gguf.out);
}

TEST(CliHf, ConvertErrorsAreOneLine) {
  TERN_REQUIRE_STORIES();
  StoriesHfDir hf("cli_errors");
  auto no_out = run_tern("convert --from hf " + quote(hf.dir));
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("needs DIR and -o"), std::string::npos) << no_out.err;
  auto bad_type = run_tern("convert --from hf " + quote(hf.dir) + " -o /tmp/x.gguf --type Q9");
  EXPECT_NE(bad_type.exit_code, 0);
  EXPECT_NE(bad_type.err.find("unknown --type 'Q9'"), std::string::npos) << bad_type.err;
  auto not_dir = run_tern("convert --from hf /nonexistent -o /tmp/x.gguf");
  EXPECT_NE(not_dir.exit_code, 0);
  EXPECT_NE(not_dir.err.find("not a Hugging Face model directory"), std::string::npos) << not_dir.err;
  std::ofstream(hf.dir + "/config.json") << R"({"model_type": "gpt_neox"})";
  auto bad_model = run_tern("run -m " + quote(hf.dir) + " -p hi -n 1");
  EXPECT_NE(bad_model.exit_code, 0);
  EXPECT_NE(bad_model.err.find("model_type 'gpt_neox' is not supported"), std::string::npos) << bad_model.err;
  EXPECT_EQ(std::count(bad_model.err.begin(), bad_model.err.end(), '\n'), 1) << bad_model.err;
}

}  // namespace
}  // namespace tern
