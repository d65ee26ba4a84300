// `tern train` as a subprocess on stories260K: fine-tuning on the first half
// of TinyStories lowers perplexity on the second half; the model runs; the
// progress, loss curve and checkpoint are written; resuming from the final
// checkpoint writes the same file; bad requests are one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../model/model_fixture.h"
#include "../model/split_text.h"
#include "cli/run_tern.h"

namespace tern {
namespace {

using Output = test::TernOutput;
std::string quote(const std::string& s) { return test::shell_quote(s); }
Output tern(const std::string& args) { return test::run_tern(args); }

std::string scratch(const std::string& name) {
  return std::string(TERN_BINARY_DIR) + "/cli_train_" + name + "." + std::to_string(::getpid());
}

double perplexity(const std::string& model, const std::string& text) {
  return test::tern_perplexity(model, text, "-c 128 --chunks 40 -t 2");
}

struct ErrorCase {
  std::string args, needle;
};

// Each command fails with one line holding its needle, and writes nothing to `never`.
void expect_clear_errors(const std::vector<ErrorCase>& cases, const std::string& never) {
  for (const auto& c : cases) {
    auto e = tern(c.args);
    EXPECT_NE(e.exit_code, 0) << c.args;
    EXPECT_NE(e.err.find(c.needle), std::string::npos) << c.args << " -> " << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << c.args << " -> " << e.err;
    EXPECT_FALSE(std::filesystem::exists(never)) << c.args;
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CliTrain, FineTuningLowersHeldOutPerplexityAndResumes) {
  TERN_REQUIRE_STORIES();
  const test::SplitText texts("cli_train");
  ASSERT_TRUE(texts.ok());
  const std::string m = test::stories_gguf(), out = scratch("out") + ".gguf", again = scratch("again") + ".gguf",
                    ck = scratch("ck") + ".gguf", svg = scratch("loss") + ".svg";
  const std::string common = " -f " + quote(texts.calib_path) + " --steps 20 --ctx 128 --batch 2 --lr 3e-4 -t 2";
  auto o = tern("train -m " + quote(m) + " -o " + quote(out) + common + " --loss-svg " + quote(svg) + " --checkpoint " +
                quote(ck) + " --checkpoint-every 5");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  // A first line, a progress line at each checkpoint (not a terminal), the summary.
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 6) << o.err;
  EXPECT_NE(o.err.find("step 20/20 loss "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("tern: wrote"), std::string::npos) << o.err;
  EXPECT_TRUE(o.out.empty());
  EXPECT_EQ(slurp(svg).rfind("<svg ", 0), 0u);
  const double base = perplexity(m, texts.eval_path), trained = perplexity(out, texts.eval_path);
  EXPECT_LT(trained, base);
  EXPECT_GT(trained, base * 0.8);  // 20 small steps: a nudge, not a new model
  auto run = tern("run -m " + quote(out) + " -p 'Once upon a time' -n 16 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.out.empty());
  // The checkpoint holds step 20: resuming it runs no step and writes the same model.
  auto r = tern("train -m " + quote(m) + " -o " + quote(again) + common + " --resume " + quote(ck));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(again), slurp(out));
  for (const std::string& p : {out, again, svg}) std::filesystem::remove(p);

  const std::string tiny = scratch("tiny") + ".txt", qwen3 = scratch("qwen3") + ".gguf", never = scratch("never") + ".gguf";
  std::ofstream(tiny) << "Once upon a time.";
  ASSERT_EQ(tern("synth --arch qwen3 --dim 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 --vocab-from " + quote(m) +
                 " --type F32 -o " + quote(qwen3)).exit_code, 0);
  const std::vector<ErrorCase> cases = {
      {"train -m " + quote(m) + " -o " + quote(never), "are required"},
      {"train -m " + quote(m) + " -o " + quote(never) + " -f " + quote(tiny), "fewer than one sequence"},
      {"train -m " + quote(m) + " -o " + quote(never) + common + " --steps 0", "--steps and --batch must be >= 1"},
      {"train -m " + quote(m) + " -o " + quote(never) + common + " --lr 0", "--lr must be in (0, 10)"},
      {"train -m " + quote(m) + " -o " + quote(never) + common + " --seed 2 --resume " + quote(ck), "resume with the same options"},
      {"train -m " + quote(m) + " -o " + quote(never) + common + " --resume " + quote(m), "not a tern train checkpoint"},
      {"train -m " + quote(qwen3) + " -o " + quote(never) + common, "training handles Llama-family blocks"},
      {"train -m /nonexistent.gguf -o " + quote(never) + common, "cannot open"},
  };
  expect_clear_errors(cases, never);
  for (const std::string& p : {ck, tiny, qwen3}) std::filesystem::remove(p);
}

// A structured-pruned stories260K distilled from the original on the first
// half of the text recovers part of the perplexity it lost on the second.
TEST(CliTrain, DistillationRecoversAPrunedModel) {
  TERN_REQUIRE_STORIES();
  const test::SplitText texts("cli_distill");
  ASSERT_TRUE(texts.ok());
  const std::string m = test::stories_gguf(), calib = scratch("calib") + ".gguf", pruned = scratch("pruned") + ".gguf",
                    out = scratch("distilled") + ".gguf", never = scratch("dnever") + ".gguf";
  ASSERT_EQ(tern("calibrate -m " + quote(m) + " -f " + quote(texts.calib_path) + " -c 64 --chunks 16 -t 2 -o " + quote(calib)).exit_code, 0);
  ASSERT_EQ(tern("prune " + quote(m) + " " + quote(pruned) + " --structured ffn=0.25 --calib " + quote(calib) + " -t 2").exit_code, 0);
  auto o = tern("distill --teacher " + quote(m) + " --student " + quote(pruned) + " -f " + quote(texts.calib_path) +
                " -o " + quote(out) + " --steps 30 --ctx 128 --batch 2 --lr 1e-3 -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("distilling into"), std::string::npos) << o.err;
  auto f = tern("info " + quote(out));
  EXPECT_NE(f.out.find("tern.distill.alpha"), std::string::npos);
  const double base = perplexity(m, texts.eval_path), before = perplexity(pruned, texts.eval_path),
               after = perplexity(out, texts.eval_path);
  EXPECT_GT(before, base * 1.5);
  EXPECT_LT(after, before - 0.25 * (before - base)) << base << " " << before << " " << after;
  const std::string other = scratch("othervocab") + ".gguf";
  ASSERT_EQ(tern("synth --arch llama --dim 64 --layers 1 --heads 4 --kv-heads 2 --ffn 128 --vocab-from " +
                 quote(std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf") +
                 " --type F32 -o " + quote(other)).exit_code, 0);
  const std::vector<ErrorCase> cases = {
      {"distill --student " + quote(pruned) + " -f " + quote(texts.calib_path) + " -o " + quote(never), "--teacher, --student"},
      {"distill --teacher " + quote(other) + " --student " + quote(pruned) + " -f " + quote(texts.calib_path) + " -o " +
           quote(never), "the same tokens"},
      {"distill --teacher " + quote(m) + " --student " + quote(pruned) + " -f " + quote(texts.calib_path) + " -o " +
           quote(never) + " --alpha 2", "--alpha in [0, 1]"},
  };
  expect_clear_errors(cases, never);
  for (const std::string& p : {calib, pruned, out, other}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace tern
