// `tern quantize` and `tern synth` as subprocesses: outputs that load and run,
// a one-line summary on a non-terminal stderr, and one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "../model/model_fixture.h"
#include "cli/run_tern.h"
#include "gguf/reader.h"

namespace tern {
namespace {

using Output = test::TernOutput;
std::string quote(const std::string& s) { return test::shell_quote(s); }
Output tern(const std::string& args) { return test::run_tern(args); }

std::string scratch(const std::string& name) {
  return std::string(TERN_BINARY_DIR) + "/cli_" + name + "." + std::to_string(::getpid()) + ".gguf";
}

std::string vocab() { return std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf"; }

TEST(CliQuantize, WritesALoadableModelAndOneSummaryLine) {
  TERN_REQUIRE_STORIES();
  const std::string out = scratch("q4km");
  auto o = tern("quantize " + quote(test::stories_gguf()) + " " + quote(out) + " q4_k_m -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(o.out.empty());
  // stderr is a file, not a terminal: no progress bar, one summary line.
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(o.err.find('\r'), std::string::npos);
  EXPECT_NE(o.err.find("Q4_K_M"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("bits/weight"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("MiB ->"), std::string::npos) << o.err;
  auto f = gguf::GgufFile::open(out);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(*f->get_u64("general.file_type"), 15u);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  auto run = tern("run -m " + quote(out) + " -p 'Once upon a time' -n 8 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.out.empty());
  std::filesystem::remove(out);
}

TEST(CliSynth, WritesARunnableModel) {
  if (!std::filesystem::exists(vocab())) GTEST_SKIP() << "tokenizer test data absent";
  const std::string out = scratch("synth");
  auto o = tern("synth --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab-from " +
                quote(vocab()) + " --type Q4_0 -o " + quote(out) + " --seed 3 -t 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("bits/weight"), std::string::npos) << o.err;
  auto f = gguf::GgufFile::open(out);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(*f->get_u64("general.file_type"), 2u);
  EXPECT_EQ(*f->get_u64("llama.context_length"), 4096u);
  auto run = tern("run -m " + quote(out) + " -p 'Hello' -n 4 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::filesystem::remove(out);
}

// Gemma at its own head size (--head-dim) and a small window, generating past it.
TEST(CliSynth, WritesRunnableGemmaModels) {
  if (!std::filesystem::exists(vocab())) GTEST_SKIP() << "tokenizer test data absent";
  for (const char* arch : {"gemma2", "gemma3"}) {
    const std::string out = scratch(arch);
    auto o = tern(std::string("synth --arch ") + arch + " --dim 64 --layers 6 --heads 4 --kv-heads 1 --head-dim 32 " +
                  "--window 4 --ffn 128 --vocab-from " + quote(vocab()) + " --type Q8_0 -o " + quote(out) + " -t 2");
    ASSERT_EQ(o.exit_code, 0) << arch << ": " << o.err;
    auto f = gguf::GgufFile::open(out);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(*f->get_u64(std::string(arch) + ".attention.key_length"), 32u);
    EXPECT_EQ(*f->get_u64(std::string(arch) + ".attention.sliding_window"), 4u);
    auto run = tern("run -m " + quote(out) + " -p 'Hello' -n 8 --temp 0");
    EXPECT_EQ(run.exit_code, 0) << arch << ": " << run.err;
    EXPECT_FALSE(run.out.empty()) << arch;
    std::filesystem::remove(out);
  }
}

TEST(CliQuantize, ErrorsAreOneClearLineAndNonZero) {
  const std::string m = test::stories_gguf().empty() ? "/nonexistent.gguf" : quote(test::stories_gguf());
  const std::string out = scratch("never");
  const std::string v = quote(vocab());
  const std::string shape = " --arch llama --layers 2 --ffn 128 --vocab-from " + v + " --type Q8_0 -o " + quote(out);
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"quantize " + m + " " + quote(out) + " Q9_X", "unknown type 'Q9_X'"},
      {"quantize /nonexistent/in.gguf " + quote(out) + " Q4_0", "cannot open"},
      {"quantize " + m + " " + quote(out), "missing TYPE"},
      {"quantize " + m + " /nonexistent-dir/out.gguf Q8_0", "cannot create"},
      {"quantize " + m + " " + quote(out) + " Q8_0 -t -1", "must not be negative"},
      {"synth --dim 64 --heads 5" + shape, "--heads 5 does not divide --dim 64"},
      {"synth --dim 64 --heads 4 --kv-heads 3" + shape, "--kv-heads 3 does not divide --heads 4"},
      {"synth --dim 60 --heads 4" + shape, "must be even"},
      {"synth --dim 64 --heads 4 --layers 2 --ffn 128 --vocab-from " + v + " -o " + quote(out), "--type is required"},
      {"synth --dim 64 --heads 4 --layers 2 --ffn 128 --vocab-from " + v + " --type Q7 -o " + quote(out),
       "unknown type 'Q7'"},
      {"synth --dim 64 --heads 4 --arch gpt2 --layers 2 --ffn 128 --vocab-from " + v + " --type F16 -o " + quote(out),
       "unsupported --arch"},
      {"synth --dim 64 --heads 4 --layers 2 --ffn 128 --vocab-from /nonexistent.gguf --type F16 -o " + quote(out),
       "cannot open"},
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
}

// tern calibrate, then quantize --calib with each method, end to end; the
// calibrated methods' errors are one clear line.
TEST(CliQuantize, CalibrateThenCalibratedMethods) {
  TERN_REQUIRE_STORIES();
  const std::string m = quote(test::stories_gguf());
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  const std::string calib = scratch("calib"), out = scratch("calibrated");
  auto c = tern("calibrate -m " + m + " -f " + quote(text) + " -c 64 --chunks 8 -o " + quote(calib));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("512 tokens in 8 windows of 64"), std::string::npos) << c.err;
  for (const char* method : {"imatrix", "gptq", "awq"}) {
    auto q = tern("quantize " + m + " " + quote(out) + " Q4_0 --calib " + quote(calib) + " --method " + method);
    EXPECT_EQ(q.exit_code, 0) << method << ": " << q.err;
    EXPECT_NE(q.err.find(std::string(method) + ": "), std::string::npos) << q.err;
    auto f = gguf::GgufFile::open(out);
    ASSERT_TRUE(f) << method;
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::Q4_0);
    std::filesystem::remove(out);
  }
  // W8A8: smoothquant is its default calibrated method; the file runs.
  for (const std::string extra : {"", " --sq-alpha 0.3", " --sq-alpha search"}) {
    auto q = tern("quantize " + m + " " + quote(out) + " W8A8 --calib " + quote(calib) + extra);
    EXPECT_EQ(q.exit_code, 0) << extra << ": " << q.err;
    EXPECT_NE(q.err.find("smoothquant: "), std::string::npos) << q.err;
    auto f = gguf::GgufFile::open(out);
    ASSERT_TRUE(f) << extra;
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::I8);
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.scale")->type, gguf::GgmlType::F32);
    auto r = tern("run -m " + quote(out) + " -p \"Once upon a time\" -n 8 --temp 0");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    std::filesystem::remove(out);
  }
  // --auto: the per-tensor table on stdout, predicted and measured KL in the summary.
  auto a = tern("quantize " + m + " " + quote(out) + " --auto --target-bpw 12 --calib " + quote(calib) +
                " --auto-types Q8_0,F16 --auto-chunks 2 --method rtn");
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("| blk.0.attn_q.weight | "), std::string::npos) << a.out;
  EXPECT_NE(a.err.find("KL predicted"), std::string::npos) << a.err;
  EXPECT_TRUE(gguf::GgufFile::open(out));
  std::filesystem::remove(out);
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"quantize " + m + " " + quote(out) + " Q4_0 --method gptq", "needs --calib CALIB.gguf"},
      {"quantize " + m + " " + quote(out) + " --auto --target-bpw 8", "--auto needs --calib"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --auto --target-bpw 8 --calib " + quote(calib), "give no TYPE"},
      {"quantize " + m + " " + quote(out) + " --auto --calib " + quote(calib), "needs --target-bpw"},
      {"quantize " + m + " " + quote(out) + " --auto --target-bpw 3 --calib " + quote(calib) + " --auto-types Q8_0",
       "the smallest mix takes"},
      {"quantize " + m + " " + quote(out) + " --auto --target-bpw 8 --calib " + quote(calib) + " --auto-types Q9",
       "unknown type 'Q9'"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --calib " + quote(calib) + " --method best", "unknown quantization method"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --calib " + m, "not a tern calibration file"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --calib " + quote(calib) + " --method gptq --calib-text " + m,
       "is not the text the calibration file was made from"},
      {"eval quant -m " + m + " -f " + quote(text) + " --calib " + quote(calib) + " --methods imatrix --types Q4_0",
       "are also in the calibration text"},
      {"calibrate -m " + m + " -o " + quote(calib), "are required"},
      {"quantize " + m + " " + quote(out) + " W8A8 --calib " + quote(calib) + " --sq-alpha 1.5", "--sq-alpha must be"},
      {"quantize " + m + " " + quote(out) + " W8A8 --calib " + quote(calib) + " --method gptq", "W8A8 takes --method rtn or smoothquant"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --calib " + quote(calib) + " --method smoothquant", "makes W8A8 files"},
      {"quantize " + m + " " + quote(out) + " Q4_0 --calib " + quote(calib) + " --method awq --sq-alpha 0.5", "--sq-alpha is for"},
  };
  for (const auto& k : cases) {
    auto o = tern(k.args);
    EXPECT_NE(o.exit_code, 0) << k.args;
    EXPECT_NE(o.err.find(k.needle), std::string::npos) << k.args << " -> " << o.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << k.args;
  }
  std::filesystem::remove(calib);
}

// GPTQ into K-quants (rows of 256 and more: a synthetic model, stories260K's rows are 64):
// Q4_K_M's Q4_K and Q6_K matrices, output head included, from one calibration pass; the file
// runs and its matrices are not round-to-nearest's. Then importance-weighted rounding of the
// Q2_K mix (Q2_K and Q3_K matrices) from the same statistics.
TEST(CliQuantize, GptqAndImatrixWriteKQuants) {
  if (!std::filesystem::exists(vocab())) GTEST_SKIP() << "tokenizer test data absent";
  const std::string text = std::string(TERN_SHARED_DIR) + "/data/text/tinystories_val.txt";
  if (!std::filesystem::exists(text)) GTEST_SKIP() << "text absent";
  const std::string m = scratch("synth256"), calib = scratch("calib256"), gq = scratch("gptq_k"), rtn = scratch("rtn_k");
  auto s = tern("synth --arch llama --dim 256 --layers 1 --heads 4 --kv-heads 2 --ffn 512 --vocab-from " + quote(vocab()) +
                " --type F16 -o " + quote(m) + " --seed 3 -t 2");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto c = tern("calibrate -m " + quote(m) + " -f " + quote(text) + " -c 32 --chunks 2 -o " + quote(calib));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto q = tern("quantize " + quote(m) + " " + quote(gq) + " Q4_K_M --calib " + quote(calib) + " --method gptq -t 2");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.err.find("gptq: 9 tensors calibrated"), std::string::npos) << q.err;
  ASSERT_EQ(tern("quantize " + quote(m) + " " + quote(rtn) + " Q4_K_M -t 2").exit_code, 0);
  auto g = gguf::GgufFile::open(gq), r = gguf::GgufFile::open(rtn);
  ASSERT_TRUE(g && r);
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output.weight"}) {
    const gguf::TensorInfo* a = g->find_tensor(name);
    const gguf::TensorInfo* b = r->find_tensor(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(a->type, b->type) << name;
    EXPECT_TRUE(a->type == gguf::GgmlType::Q4_K || a->type == gguf::GgmlType::Q6_K) << name;
    EXPECT_NE(std::memcmp(a->data, b->data, a->n_bytes), 0) << name;
  }
  auto run = tern("run -m " + quote(gq) + " -p Hello -n 4 --temp 0");
  EXPECT_EQ(run.exit_code, 0) << run.err;

  const std::string iq2 = scratch("imatrix_q2k"), rtn2 = scratch("rtn_q2k");
  auto q2 = tern("quantize " + quote(m) + " " + quote(iq2) + " Q2_K --calib " + quote(calib) + " -t 2");
  ASSERT_EQ(q2.exit_code, 0) << q2.err;
  ASSERT_EQ(tern("quantize " + quote(m) + " " + quote(rtn2) + " Q2_K -t 2").exit_code, 0);
  auto g2 = gguf::GgufFile::open(iq2), r2 = gguf::GgufFile::open(rtn2);
  ASSERT_TRUE(g2 && r2);
  std::set<gguf::GgmlType> seen;
  for (const gguf::TensorInfo& a : g2->tensors()) {
    if (a.type != gguf::GgmlType::Q2_K && a.type != gguf::GgmlType::Q3_K) continue;
    if (a.name == "token_embd.weight") continue;  // a lookup table: no input activations to weigh by
    const gguf::TensorInfo* b = r2->find_tensor(a.name);
    ASSERT_TRUE(b && b->type == a.type) << a.name;
    EXPECT_NE(std::memcmp(a.data, b->data, a.n_bytes), 0) << a.name;
    seen.insert(a.type);
  }
  EXPECT_EQ(seen.size(), 2u) << "the Q2_K mix has Q2_K and Q3_K matrices";
  EXPECT_EQ(tern("run -m " + quote(iq2) + " -p Hello -n 4 --temp 0").exit_code, 0);
  for (const auto& p : {m, calib, gq, rtn, iq2, rtn2}) std::filesystem::remove(p);
}

// Quantizing a file onto itself would replace the only full-precision copy:
// refused whatever the spelling (same path, ./, a hard link, a symlink), and
// the file keeps every byte.
TEST(CliQuantize, RefusesToWriteOverItsInput) {
  TERN_REQUIRE_STORIES();
  const std::string dir = std::string(TERN_BINARY_DIR) + "/cli_quantize_self." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string x = dir + "/x.gguf";
  std::filesystem::copy_file(test::stories_gguf(), x);
  std::filesystem::create_hard_link(x, dir + "/hard.gguf");
  std::filesystem::create_symlink(x, dir + "/soft.gguf");
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string before = bytes(x);
  for (const std::string& out : {x, dir + "/./x.gguf", dir + "/hard.gguf", dir + "/soft.gguf"}) {
    auto o = tern("quantize " + quote(x) + " " + quote(out) + " Q8_0 -t 2");
    EXPECT_EQ(o.exit_code, 2) << out << " -> " << o.err;
    EXPECT_NE(o.err.find("tern: quantize: the output '" + out + "' is the input file '" + x + "'"), std::string::npos)
        << o.err;
    EXPECT_TRUE(bytes(x) == before) << "the input changed through " << out;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  }
  // Control: a new path next to it works.
  auto ok = tern("quantize " + quote(x) + " " + quote(dir + "/q8.gguf") + " Q8_0 -t 2");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tern
