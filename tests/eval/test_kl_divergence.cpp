#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "eval/kl_divergence.h"
#include "eval/logits_file.h"

namespace tern::eval {
namespace {

std::vector<double> lsm(const std::vector<float>& logits) {
  std::vector<double> out(logits.size());
  log_softmax(logits, out);
  return out;
}

std::vector<float> logs_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (double v : p) out.push_back(static_cast<float>(std::log(v)));
  return out;
}

TEST(KlDivergence, IdenticalIsZero) {
  const std::vector<float> a = {1.5f, -2.0f, 0.25f, 7.0f, 3.0f};
  EXPECT_NEAR(kl_divergence(lsm(a), lsm(a)), 0.0, 1e-15);
}

TEST(KlDivergence, HandComputedValues) {
  // P = (1/2, 1/2), Q = (3/4, 1/4): KL = 1/2 ln(4/3).
  EXPECT_NEAR(kl_divergence(lsm({0.0f, 0.0f}), lsm({std::log(3.0f), 0.0f})), 0.5 * std::log(4.0 / 3.0), 1e-7);
  // P = (.2, .3, .5), Q = (.1, .6, .3): .2 ln 2 + .3 ln .5 + .5 ln(5/3).
  const double want = 0.2 * std::log(2.0) + 0.3 * std::log(0.5) + 0.5 * std::log(5.0 / 3.0);
  EXPECT_NEAR(kl_divergence(lsm(logs_of({.2, .3, .5})), lsm(logs_of({.1, .6, .3}))), want, 1e-7);
  // Not symmetric.
  const double reverse = 0.1 * std::log(0.5) + 0.6 * std::log(2.0) + 0.3 * std::log(0.6);
  EXPECT_NEAR(kl_divergence(lsm(logs_of({.1, .6, .3})), lsm(logs_of({.2, .3, .5}))), reverse, 1e-7);
}

TEST(KlDivergence, InvariantToAConstantAndStableForLargeLogits) {
  const std::vector<float> a = {0.5f, 2.0f, -1.0f, 3.5f};
  std::vector<float> shifted = a, huge = a;
  for (float& x : shifted) x += 1000.0f;
  for (float& x : huge) x = x * 1000.0f + 5e4f;
  const auto la = lsm(a), ls = lsm(shifted), lh = lsm(huge);
  for (size_t v = 0; v < a.size(); ++v) {
    EXPECT_NEAR(la[v], ls[v], 1e-4);  // float addition rounds the shifted logits a little
    EXPECT_TRUE(std::isfinite(lh[v]));
  }
  EXPECT_NEAR(kl_divergence(la, ls), 0.0, 1e-6);
  double sum = 0;
  for (double v : lh) sum += std::exp(v);
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(KlDivergence, Percentile) {
  const std::vector<double> s = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(percentile(s, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(percentile(s, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(s, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(percentile(s, 0.99), 4.96);
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(percentile(one, 0.99), 7.0);
}

TEST(KlAccumulator, TopOneAgreementAndPerplexityRatio) {
  KlAccumulator acc;
  const std::vector<float> base = {0.0f, 2.0f, 1.0f};    // argmax 1
  const std::vector<float> same = base;
  const std::vector<float> other = {3.0f, 0.0f, 1.0f};   // argmax 0
  const auto lb = lsm(base);
  acc.add(lb, 1, same, 1);
  acc.add(lb, 1, same, 2);
  acc.add(lb, 1, other, 1);
  acc.add(lb, 1, same, 1);
  const double base_nll = -(lb[1] + lb[2] + lb[1] + lb[1]) / 4;
  const KlSummary s = acc.summary(base_nll);
  EXPECT_EQ(s.n_tokens, 4);
  EXPECT_DOUBLE_EQ(s.top1_agreement, 0.75);
  EXPECT_DOUBLE_EQ(s.kl_median, 0.0);
  const double kl_other = kl_divergence(lb, lsm(other));
  EXPECT_NEAR(s.kl_mean, kl_other / 4, 1e-12);
  EXPECT_NEAR(s.kl_max, kl_other, 1e-12);
  EXPECT_GT(s.kl_p99, 0.9 * kl_other);
  const double model_nll = -(lb[1] + lb[2] + lsm(other)[1] + lb[1]) / 4;
  EXPECT_NEAR(s.nll_mean_model, model_nll, 1e-12);
  EXPECT_NEAR(s.ppl_ratio, std::exp(model_nll - base_nll), 1e-12);
}

class LogitsFileTest : public ::testing::Test {
 protected:
  std::string path_ = std::string(TERN_BINARY_DIR) + "/logits_test." + std::to_string(::getpid()) + ".bin";
  void TearDown() override { std::filesystem::remove(path_); }

  // Rows r = 0..5 of a 5-token vocabulary; row r's argmax is r % 5.
  static std::vector<float> row(int r) {
    std::vector<float> v(5);
    for (int i = 0; i < 5; ++i) v[i] = 0.3f * i - 0.1f * r + (i == r % 5 ? 4.0f : 0.0f);
    return v;
  }
  LogitsFileHeader header() const {
    LogitsFileHeader h;
    h.n_vocab = 5;
    h.n_ctx = 8;
    h.n_chunks = 2;
    h.n_rows_per_chunk = 3;
    h.tokens_hash = 0x1234;
    return h;
  }
  void write_file() {
    auto w = LogitsWriter::create(path_, header());
    ASSERT_TRUE(w) << w.status().message();
    for (int r = 0; r < 6; ++r) ASSERT_TRUE(w->write_row(row(r)));
    ASSERT_TRUE(w->finish(1.25));
  }
};

TEST_F(LogitsFileTest, RoundTrip) {
  write_file();
  EXPECT_EQ(std::filesystem::file_size(path_), kLogitsHeaderBytes + 6 * (4 + 2 * 5));
  auto r = LogitsReader::open(path_);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->header().n_chunks, 2u);
  EXPECT_EQ(r->header().n_rows_per_chunk, 3u);
  EXPECT_EQ(r->header().base_nll_mean, 1.25);
  EXPECT_TRUE(r->check_matches(5, 8, 0x1234));
  std::vector<double> lp(5);
  int32_t top1 = -1;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(r->read_row(lp, top1));
    EXPECT_EQ(top1, i % 5);
    const auto want = lsm(row(i));
    for (int v = 0; v < 5; ++v) EXPECT_NEAR(lp[v], want[v], std::abs(want[v]) * 1e-3 + 1e-6);
    EXPECT_LT(kl_divergence(want, lp), 1e-6);
  }
  EXPECT_FALSE(r->read_row(lp, top1));
}

TEST_F(LogitsFileTest, RejectsMismatchedModelOrText) {
  write_file();
  auto r = LogitsReader::open(path_);
  ASSERT_TRUE(r);
  const Status vocab = r->check_matches(6, 8, 0x1234);
  EXPECT_FALSE(vocab);
  EXPECT_NE(vocab.message().find("vocabulary"), std::string::npos);
  EXPECT_NE(r->check_matches(5, 16, 0x1234).message().find("-c 8"), std::string::npos);
  EXPECT_NE(r->check_matches(5, 8, 0x9999).message().find("other tokens"), std::string::npos);
}

TEST_F(LogitsFileTest, RejectsTruncatedAndForeignFiles) {
  write_file();
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - 3);
  auto r = LogitsReader::open(path_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  { std::ofstream(path_, std::ios::binary) << "GGUF and then something else entirely, long enough for a header"; }
  auto g = LogitsReader::open(path_);
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("not a saved-logits file"), std::string::npos);
  EXPECT_FALSE(LogitsReader::open(path_ + ".absent"));
}

TEST_F(LogitsFileTest, UnfinishedWriterLeavesNothing) {
  {
    auto w = LogitsWriter::create(path_, header());
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write_row(row(0)));
    EXPECT_FALSE(w->finish(0.0));  // 1 of 6 rows
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST(HashTokens, DependsOnTokensAndWindow) {
  const std::vector<TokenId> a = {1, 2, 3}, b = {1, 3, 2};
  EXPECT_EQ(hash_tokens(a, 8), hash_tokens(a, 8));
  EXPECT_NE(hash_tokens(a, 8), hash_tokens(b, 8));
  EXPECT_NE(hash_tokens(a, 8), hash_tokens(a, 16));
}

}  // namespace
}  // namespace tern::eval
