// `tern prune` as a subprocess on stories260K: each method's written tensors
// have exactly the sparsity or pattern asked for, everything else is copied
// byte for byte, the files run, the calibrated methods lose less perplexity
// than magnitude pruning on text disjoint from their calibration text, and
// bad requests are one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "../model/model_fixture.h"
#include "../model/split_text.h"
#include "cli/run_tern.h"
#include "gguf/reader.h"
#include "model/prune.h"
#include "quant/quant.h"

namespace tern {
namespace {

using Output = test::TernOutput;
std::string quote(const std::string& s) { return test::shell_quote(s); }
Output tern(const std::string& args) { return test::run_tern(args); }

std::string scratch(const std::string& name) {
  return std::string(TERN_BINARY_DIR) + "/cli_prune_" + name + "." + std::to_string(::getpid());
}

std::vector<float> floats(const gguf::TensorInfo& t) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) n *= t.dims[d];
  std::vector<float> w(n);
  quant::traits(t.type)->to_float(t.data, w.data(), static_cast<int64_t>(n));
  return w;
}

double perplexity(const std::string& model, const std::string& text) {
  return test::tern_perplexity(model, text, "-c 64 --chunks 24 -t 2");
}

TEST(CliPrune, EachMethodWritesExactSparsityThatRunsAndCalibratedMethodsLoseLess) {
  TERN_REQUIRE_STORIES();
  const test::SplitText texts("cli_prune");
  ASSERT_TRUE(texts.ok());
  const std::string m = test::stories_gguf(), calib = scratch("calib") + ".gguf";
  auto c = tern("calibrate -m " + quote(m) + " -f " + quote(texts.calib_path) + " -c 64 --chunks 16 -t 2 -o " + quote(calib));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto in = gguf::GgufFile::open(m);
  ASSERT_TRUE(in);
  struct Case {
    std::string name, args;
    int pattern_m;  // 0: unstructured
  };
  const Case cases[] = {
      {"magnitude", "--method magnitude --sparsity 0.5", 0},
      {"wanda", "--method wanda --sparsity 0.5 --calib " + quote(calib), 0},
      {"sparsegpt", "--sparsity 0.5 --calib " + quote(calib), 0},  // sparsegpt: the default with --calib
      {"magnitude24", "--method magnitude --pattern 2:4", 4},
      {"sparsegpt24", "--method sparsegpt --pattern 2:4 --calib " + quote(calib), 4},
  };
  std::map<std::string, double> ppl;
  const double base = perplexity(m, texts.eval_path);
  for (const Case& k : cases) {
    const std::string out = scratch(k.name) + ".gguf";
    auto o = tern("prune " + quote(m) + " " + quote(out) + " " + k.args + " -t 2");
    ASSERT_EQ(o.exit_code, 0) << k.name << ": " << o.err;
    // One summary line (SparseGPT: after one line for its pass over the calibration text).
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), k.name.starts_with("sparsegpt") ? 2 : 1) << o.err;
    EXPECT_NE(o.err.find("35 matrices pruned"), std::string::npos) << o.err;
    EXPECT_NE(o.out.find("| blk.4.ffn_down.weight | 11008 |"), std::string::npos) << o.out;
    auto f = gguf::GgufFile::open(out);
    ASSERT_TRUE(f) << k.name;
    EXPECT_EQ(*f->get_string("tern.prune.method"), k.name.starts_with("magnitude") ? "magnitude"
                                                   : k.name.starts_with("wanda")   ? "wanda"
                                                                                   : "sparsegpt");
    ASSERT_EQ(f->tensors().size(), in->tensors().size());
    for (size_t i = 0; i < in->tensors().size(); ++i) {
      const gguf::TensorInfo& a = in->tensors()[i];
      const gguf::TensorInfo& b = f->tensors()[i];
      ASSERT_EQ(a.name, b.name);
      ASSERT_EQ(a.type, b.type);
      ASSERT_EQ(a.n_bytes, b.n_bytes);
      if (!is_prunable(a.name, a.n_dims)) {
        EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << k.name << " changed " << a.name;
        continue;
      }
      const std::vector<float> w = floats(b), w0 = floats(a);
      const int64_t cols = static_cast<int64_t>(a.dims[0]), n = static_cast<int64_t>(w.size());
      auto zeros = [&](int64_t from, int64_t len) {
        return std::count(w.begin() + from, w.begin() + from + len, 0.0f);
      };
      if (k.pattern_m) {
        for (int64_t g = 0; g < n; g += k.pattern_m) ASSERT_EQ(zeros(g, k.pattern_m), 2) << k.name << " " << a.name;
      } else if (k.name == "magnitude") {
        EXPECT_EQ(zeros(0, n), n / 2) << a.name;
      } else {
        for (int64_t r = 0; r < n; r += cols) ASSERT_EQ(zeros(r, cols), cols / 2) << k.name << " " << a.name;
      }
      if (k.name != "sparsegpt" && k.name != "sparsegpt24") {  // only SparseGPT moves the weights it keeps
        for (int64_t i2 = 0; i2 < n; ++i2) {
          if (w[i2] != 0.0f) {
            ASSERT_EQ(w[i2], w0[i2]) << k.name << " " << a.name;
          }
        }
      }
    }
    auto run = tern("run -m " + quote(out) + " -p 'Once upon a time' -n 16 --temp 0");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_FALSE(run.out.empty()) << k.name;
    ppl[k.name] = perplexity(out, texts.eval_path);
    std::filesystem::remove(out);
  }
  std::filesystem::remove(calib);
  // Every pruned model is worse than the base; SparseGPT loses the least, at 50% and at 2:4.
  for (const auto& [name, p] : ppl) EXPECT_GT(p, base) << name;
  EXPECT_LT(ppl["sparsegpt"], ppl["magnitude"]);
  EXPECT_LT(ppl["sparsegpt"], ppl["wanda"]);
  EXPECT_LT(ppl["wanda"], ppl["magnitude"]);
  EXPECT_LT(ppl["sparsegpt24"], ppl["magnitude24"]);
}

// A 2:4-pruned model in Q8_0_S24 (sparse values and positions) computes
// exactly what its Q8_0 file computes, in a smaller file; an unpruned model is refused.
TEST(CliPrune, TwoFourModelInQ8_0_S24RunsExactlyAsItsQ8_0File) {
  TERN_REQUIRE_STORIES();
  const test::SplitText texts("cli_prune_s24");
  ASSERT_TRUE(texts.ok());
  const std::string m = quote(test::stories_gguf()), pruned = scratch("p24") + ".gguf", s24 = scratch("s24") + ".gguf",
                    q8 = scratch("q8_24") + ".gguf";
  ASSERT_EQ(tern("prune " + m + " " + quote(pruned) + " --pattern 2:4 -t 2").exit_code, 0);
  auto a = tern("quantize " + quote(pruned) + " " + quote(s24) + " Q8_0_S24 -t 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(tern("quantize " + quote(pruned) + " " + quote(q8) + " Q8_0 -t 2").exit_code, 0);
  auto f = gguf::GgufFile::open(s24);
  ASSERT_TRUE(f);
  int sparse = 0;
  for (const auto& t : f->tensors()) sparse += t.type == gguf::GgmlType::Q8_0_S24 ? 1 : 0;
  EXPECT_EQ(sparse, 30);  // q, k, v, output, gate, up of 5 layers (ffn_down's rows of 172 are F16 in both files)
  EXPECT_LT(std::filesystem::file_size(s24), std::filesystem::file_size(q8));
  for (const std::string& args : {std::string(" -f ") + quote(texts.eval_path) + " -c 64 --chunks 8 -t 2 --json"}) {
    auto ps = tern("perplexity -m " + quote(s24) + args), pq = tern("perplexity -m " + quote(q8) + args);
    ASSERT_EQ(ps.exit_code, 0) << ps.err;
    EXPECT_EQ(ps.out, pq.out);
  }
  auto rs = tern("run -m " + quote(s24) + " -p 'Once upon a time' -n 48 --temp 0"),
       rq = tern("run -m " + quote(q8) + " -p 'Once upon a time' -n 48 --temp 0");
  ASSERT_EQ(rs.exit_code, 0) << rs.err;
  EXPECT_FALSE(rs.out.empty());
  EXPECT_EQ(rs.out, rq.out);
  auto bad = tern("quantize " + m + " " + quote(scratch("never24") + ".gguf") + " Q8_0_S24 -t 2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("more than 2 nonzero weights in a group of 4"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(scratch("never24") + ".gguf"));
  for (const std::string& p : {pruned, s24, q8}) std::filesystem::remove(p);
}

// Structured pruning end to end: a smaller dense model whose shape and
// summary say what went, that runs (also after tern quantize), loses
// perplexity, and loses less when activations choose what goes than when the
// same amount goes from a model it hurts more (the full spec vs FFN alone);
// and its errors.
TEST(CliPrune, StructuredWritesASmallerDenseModelThatRuns) {
  TERN_REQUIRE_STORIES();
  const test::SplitText texts("cli_prune_structured");
  ASSERT_TRUE(texts.ok());
  const std::string m = test::stories_gguf(), calib = scratch("scalib") + ".gguf", out = scratch("structured") + ".gguf",
                    ffn = scratch("structured_ffn") + ".gguf", q8 = scratch("structured_q8") + ".gguf",
                    never = scratch("snever") + ".gguf";
  auto c = tern("calibrate -m " + quote(m) + " -f " + quote(texts.calib_path) + " -c 64 --chunks 16 -t 2 -o " + quote(calib));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto o = tern("prune " + quote(m) + " " + quote(out) + " --structured heads=0.25,ffn=0.25,layers=1 --calib " +
                quote(calib) + " -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 2) << o.err;  // the head ablation's line, the summary
  EXPECT_NE(o.err.find("21 passes over 8 windows of 64 tokens"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("4 of 5 layers, 6 of 8 query heads (3 of 4 K/V), 129 of 172 FFN channels"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 7) << o.out;  // header, rule, 5 layers
  EXPECT_NE(o.out.find("| removed | - | 0 of 172 |"), std::string::npos) << o.out;
  EXPECT_LT(std::filesystem::file_size(out), std::filesystem::file_size(m) * 3 / 4);
  auto run = tern("run -m " + quote(out) + " -p 'Once upon a time' -n 16 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.out.empty());
  auto f = tern("prune " + quote(m) + " " + quote(ffn) + " --structured ffn=0.25 --calib " + quote(calib) + " -t 2");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const double base = perplexity(m, texts.eval_path), p_all = perplexity(out, texts.eval_path),
               p_ffn = perplexity(ffn, texts.eval_path);
  EXPECT_GT(p_ffn, base);
  EXPECT_GT(p_all, p_ffn);
  EXPECT_LT(p_all, 200.0);  // damaged, not destroyed
  // The pruned file quantizes (rows of 64 and 129 columns; the latter fall back) and runs.
  auto q = tern("quantize " + quote(out) + " " + quote(q8) + " Q8_0 -t 2");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(tern("run -m " + quote(q8) + " -p 'Once' -n 8 --temp 0").exit_code, 0);
  // Column slicing refuses quantized matrices; removing layers copies them.
  ASSERT_EQ(tern("quantize " + quote(m) + " " + quote(q8) + " Q8_0 -t 2").exit_code, 0);
  auto bad = tern("prune " + quote(q8) + " " + quote(never) + " --structured heads=0.4 --calib " + quote(calib));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("needs F32, F16 or BF16"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(never));
  auto layers = tern("prune " + quote(q8) + " " + quote(never) + " --structured layers=2 --calib " + quote(calib));
  EXPECT_EQ(layers.exit_code, 0) << layers.err;
  EXPECT_EQ(tern("run -m " + quote(never) + " -p 'Once' -n 8 --temp 0").exit_code, 0);
  std::filesystem::remove(never);
  const struct {
    std::string args, needle;
  } cases[] = {
      {"--structured ffn=0.25", "give --calib"},
      {"--structured ffn=0.25 --method wanda --calib " + quote(calib), "two tern prune commands"},
      {"--structured ffn=0.25 --sparsity 0.5 --calib " + quote(calib), "two tern prune commands"},
      {"--structured ffn=2 --calib " + quote(calib), "fraction in (0, 1)"},
      {"--structured layers=5 --calib " + quote(calib), "at least one must stay"},
      {"--structured heads=0.5 --heads-by luck --calib " + quote(calib), "ablation or activation"},
      {"--structured heads=0.5 --head-windows 0 --calib " + quote(calib), "at least 1"},
      {"--structured heads=0.5 --calib-text " + quote(texts.eval_path) + " --calib " + quote(calib),
       "is not the text the calibration file was made from"},
      {"--structured ffn=0.25 --calib " + quote(m), "not a tern calibration file"},
  };
  for (const auto& k : cases) {
    auto e = tern("prune " + quote(m) + " " + quote(never) + " " + k.args);
    EXPECT_NE(e.exit_code, 0) << k.args;
    EXPECT_NE(e.err.find(k.needle), std::string::npos) << k.args << " -> " << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << k.args << " -> " << e.err;
    EXPECT_FALSE(std::filesystem::exists(never)) << k.args;
  }
  for (const std::string& p : {calib, out, ffn, q8}) std::filesystem::remove(p);
}

TEST(CliPrune, ErrorsAreOneClearLineAndNonZero) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf()), out = scratch("never") + ".gguf", q8 = scratch("q8") + ".gguf";
  auto q = tern("quantize " + m + " " + quote(q8) + " Q8_0 -t 2");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"prune " + m + " " + quote(out), "give --sparsity S"},
      {"prune " + m + " " + quote(out) + " --sparsity 1", "[0, 1)"},
      {"prune " + m + " " + quote(out) + " --method wanda --sparsity 0.5", "needs --calib"},
      {"prune " + m + " " + quote(out) + " --method magnitude --sparsity 0.5 --calib x.gguf", "not used by --method magnitude"},
      {"prune " + m + " " + quote(out) + " --method random --sparsity 0.5", "unknown pruning method 'random'"},
      {"prune " + m + " " + quote(out) + " --pattern 2-4", "not N:M"},
      {"prune " + m + " " + quote(out) + " --pattern 2:4 --sparsity 0.6", "make them agree"},
      {"prune " + m + " " + quote(out) + " --pattern 3:8", "do not divide into groups of 8"},
      {"prune " + m + " " + quote(out) + " --method wanda --sparsity 0.5 --calib /nonexistent.gguf", "cannot open"},
      {"prune " + quote(q8) + " " + quote(out) + " --sparsity 0.5", "prune the model it was quantized from"},
      {"prune " + m + " " + m + " --sparsity 0.5", "is the input file"},
      {"prune /nonexistent.gguf " + quote(out) + " --sparsity 0.5", "cannot open"},
  };
  for (const auto& c : cases) {
    auto o = tern(c.args);
    EXPECT_NE(o.exit_code, 0) << c.args;
    EXPECT_NE(o.err.find(c.needle), std::string::npos) << c.args << " -> " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << c.args << " -> " << o.err;
    EXPECT_TRUE(o.out.empty()) << c.args;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << c.args;
  }
  std::filesystem::remove(q8);
}

}  // namespace
}  // namespace tern
