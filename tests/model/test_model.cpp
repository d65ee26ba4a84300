#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/batch_runner.h"
#include "model/model.h"
#include "model_fixture.h"
#include "reference_llama2c.h"

namespace tern {
namespace {

using test::stories_gguf;

std::unique_ptr<Model> load_stories() {
  auto m = Model::load(stories_gguf());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m ? std::move(m).value() : nullptr;
}

// Logits of every position of `tokens` as one sequence, fed `chunk` tokens per forward.
std::vector<std::vector<float>> run_all(const Model& m, const std::vector<int>& tokens, size_t chunk,
                                        KvType kv_type = KvType::F32) {
  auto runner = BatchRunner::create(m, 1, m.hparams().n_ctx_train, kv_type);
  EXPECT_TRUE(runner.is_ok());
  BatchRunner& kv = *runner.value();
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    Batch b;
    for (size_t j = i; j < std::min(tokens.size(), i + chunk); ++j) b.add(tokens[j], static_cast<int32_t>(j), SeqId(0), true);
    auto s = kv.forward(b, logits);
    EXPECT_TRUE(s.is_ok()) << s.message();
    const int nv = m.hparams().n_vocab;
    for (size_t r = 0; r < b.size(); ++r) rows.emplace_back(logits.begin() + r * nv, logits.begin() + (r + 1) * nv);
  }
  return rows;
}

TEST(Model, ConvertedHyperParameters) {
  TERN_REQUIRE_STORIES();
  auto m = load_stories();
  ASSERT_TRUE(m);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, "llama");
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_ff, 172);
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(hp.n_ctx_train, 512);
  EXPECT_EQ(hp.head_dim, 8);
  EXPECT_EQ(hp.rope.layout, kernels::RopeLayout::Normal);
}

// f32 engine vs double reference: the only differences are f32 rounding in
// sums of at most 172 products of O(1) values through 5 layers, so logits
// (magnitude ~10) agree to ~1e-5 relative; 2e-4 absolute leaves margin while
// still catching any wrong op (a wrong RoPE pair or GQA map moves logits by >0.1).
TEST(Model, MatchesDoublePrecisionReference) {
  TERN_REQUIRE_STORIES();
  auto m = load_stories();
  ASSERT_TRUE(m);
  test::ReferenceLlama2c ref;
  ASSERT_TRUE(ref.load(test::stories_dir() + "/stories260K.bin"));
  const std::vector<std::vector<int>> prompts = {
      {1},
      {1, 403, 407, 261, 378},
      {1, 13, 13, 300, 301, 302, 259, 260, 261, 262, 500, 511, 3, 258},
      test::golden_ids(),  // 201 tokens: long-range positions
  };
  for (const auto& p : prompts) {
    auto got = run_all(*m, p, 64);
    auto want = ref.forward_all(p);
    ASSERT_EQ(got.size(), want.size());
    double max_diff = 0.0;
    for (size_t t = 0; t < got.size(); ++t)
      for (size_t v = 0; v < got[t].size(); ++v) max_diff = std::max(max_diff, std::fabs(got[t][v] - want[t][v]));
    EXPECT_LT(max_diff, 2e-4) << "prompt of " << p.size() << " tokens";
  }
}

TEST(Model, GreedyDecodeMatchesGoldenIds) {
  TERN_REQUIRE_STORIES();
  auto m = load_stories();
  ASSERT_TRUE(m);
  const auto golden = test::golden_ids();
  ASSERT_EQ(golden.size(), 201u);
  auto kv = std::move(BatchRunner::create(*m, 1, 512)).value();
  std::vector<int> ids = {golden[0]};
  std::vector<float> logits;
  for (int step = 0; step < 200; ++step) {
    Batch b;
    b.add(ids.back(), step, SeqId(0), true);
    ASSERT_TRUE(kv->forward(b, logits).is_ok());
    ids.push_back(static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  EXPECT_EQ(ids, golden);
}

// The same tokens give bit-identical logits whether fed at once, in chunks or
// one at a time, and whether a sequence shares its batch with another: every
// kernel's arithmetic for a token is independent of the batch around it, for
// every KV cache encoding.
class BatchingInvariance : public testing::TestWithParam<KvType> {};

TEST_P(BatchingInvariance, LogitsAreBitIdentical) {
  TERN_REQUIRE_STORIES();
  const KvType kv_type = GetParam();
  auto m = load_stories();
  ASSERT_TRUE(m);
  auto golden = test::golden_ids();
  std::vector<int> a(golden.begin(), golden.begin() + 60), b(golden.begin() + 100, golden.begin() + 140);
  b[0] = 1;
  auto one = run_all(*m, a, 1, kv_type);
  auto all = run_all(*m, a, a.size(), kv_type);
  auto seven = run_all(*m, a, 7, kv_type);
  ASSERT_EQ(one.size(), all.size());
  for (size_t t = 0; t < one.size(); ++t)
    for (size_t v = 0; v < one[t].size(); ++v) {
      ASSERT_EQ(one[t][v], all[t][v]) << "position " << t;  // bit-exact: batch invariance
      ASSERT_EQ(one[t][v], seven[t][v]) << "position " << t;
    }

  // Two sequences interleaved in ragged batches.
  auto kv = std::move(BatchRunner::create(*m, 2, 512, kv_type)).value();
  auto alone_b = run_all(*m, b, 1, kv_type);
  std::vector<float> logits;
  size_t ia = 0, ib = 0;
  while (ia < a.size() || ib < b.size()) {
    Batch batch;
    for (int k = 0; k < 3 && ia < a.size(); ++k, ++ia) batch.add(a[ia], static_cast<int32_t>(ia), SeqId(0), true);
    for (int k = 0; k < 2 && ib < b.size(); ++k, ++ib) batch.add(b[ib], static_cast<int32_t>(ib), SeqId(1), true);
    ASSERT_TRUE(kv->forward(batch, logits).is_ok());
    const int nv = m->hparams().n_vocab;
    for (size_t r = 0; r < batch.size(); ++r) {
      const auto& want = batch.seq_ids[r].value == 0 ? one[batch.positions[r]] : alone_b[batch.positions[r]];
      for (int v = 0; v < nv; ++v) ASSERT_EQ(logits[r * nv + v], want[v]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Model, BatchingInvariance, testing::Values(KvType::F32, KvType::F16, KvType::Q8_0),
                         [](const testing::TestParamInfo<KvType>& p) { return std::string(kv_type_name(p.param)); });

TEST(Model, RejectsBadBatches) {
  TERN_REQUIRE_STORIES();
  auto m = load_stories();
  ASSERT_TRUE(m);
  auto kv = std::move(BatchRunner::create(*m, 1, 16)).value();
  std::vector<float> logits;
  Batch gap;
  gap.add(1, 1, SeqId(0), true);  // the cache is empty: position 0 expected
  EXPECT_EQ(kv->forward(gap, logits).kind(), ErrorKind::InvalidArgument);
  Batch bad_token;
  bad_token.add(512, 0, SeqId(0), true);
  EXPECT_EQ(kv->forward(bad_token, logits).kind(), ErrorKind::InvalidArgument);
  Batch too_long;
  for (int i = 0; i < 17; ++i) too_long.add(1, i, SeqId(0), false);
  EXPECT_EQ(kv->forward(too_long, logits).kind(), ErrorKind::OutOfRange);
  Batch bad_seq;
  bad_seq.add(1, 0, SeqId(3), true);
  EXPECT_EQ(kv->forward(bad_seq, logits).kind(), ErrorKind::OutOfRange);
  Batch huge_seq;
  huge_seq.add(1, 0, SeqId(INT32_MAX), true);
  EXPECT_EQ(kv->forward(huge_seq, logits).kind(), ErrorKind::OutOfRange);
  Batch negative_seq;
  negative_seq.add(1, 0, SeqId(-1), true);
  EXPECT_EQ(kv->forward(negative_seq, logits).kind(), ErrorKind::InvalidArgument);
}

}  // namespace
}  // namespace tern
