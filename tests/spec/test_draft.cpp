// The draft-model proposer: proposals are the draft's own greedy
// continuation; after rejections (a sequence that diverged from what was
// drafted) it proposes exactly what a fresh proposer would; many sequences
// in one call propose what each would alone; slots run out and come back;
// a draft with another vocabulary is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../model/model_fixture.h"
#include "../model/one_by_one.h"
#include "backend/backend.h"
#include "draft_models.h"
#include "spec/draft.h"

namespace tern::spec {
namespace {

std::unique_ptr<DraftProposer> make(const std::string& draft, int max_seqs = 4) {
  auto target = gguf::GgufFile::open(test::stories_gguf());
  EXPECT_TRUE(target.is_ok());
  auto p = DraftProposer::create(draft, *target, backend::make_backend(BackendKind::Cpu, 2), max_seqs, 512);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return p.is_ok() ? std::move(p).value() : nullptr;
}

std::vector<TokenId> prompt(int n, int offset = 0) {
  const std::vector<int> g = test::golden_ids();
  return std::vector<TokenId>(g.begin() + offset, g.begin() + offset + n);
}

// The draft's greedy continuation of `tokens`, k tokens, fed one at a time.
std::vector<TokenId> greedy(const Model& m, std::vector<TokenId> tokens, int k) {
  std::vector<TokenId> out;
  for (int i = 0; i < k; ++i) {
    const auto rows = test::logits_one_by_one(m, tokens);
    const std::vector<float>& last = rows.back();
    const TokenId t = static_cast<TokenId>(std::max_element(last.begin(), last.end()) - last.begin());
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

TEST(DraftProposer, ProposesTheDraftsGreedyContinuation) {
  TERN_REQUIRE_STORIES();
  auto p = make(test::draft_files().random);
  ASSERT_TRUE(p);
  const std::vector<TokenId> t = prompt(20);
  const DraftRequest q{RequestId(1), t, 5};
  auto got = p->propose(std::span(&q, 1));
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ((*got)[0].tokens, greedy(p->model(), t, 5));
  EXPECT_EQ((*got)[0].parents, (std::vector<int32_t>{-1, 0, 1, 2, 3}));
}

// Width 3: the same greedy chain first, then at each depth the draft's
// second and third choices there — those it gives a probability of at least
// 0.1 — as leaves whose parent is the chain's node before that depth.
TEST(DraftProposer, ATreeAddsTheLikelyNextChoicesAtEveryDepth) {
  TERN_REQUIRE_STORIES();
  auto p = make(test::draft_files().random);
  ASSERT_TRUE(p);
  size_t n_leaves = 0, n_dropped = 0;
  for (int offset : {0, 20, 40, 60, 80}) {
    const std::vector<TokenId> t = prompt(20, offset);
    DraftRequest q{RequestId(1 + offset), t, 4};
    q.width = 3;
    auto got = p->propose(std::span(&q, 1));
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    const TokenTree& tree = (*got)[0];
    const std::vector<TokenId> chain = greedy(p->model(), t, 4);
    ASSERT_GE(tree.size(), 4u);
    EXPECT_EQ(std::vector<TokenId>(tree.tokens.begin(), tree.tokens.begin() + 4), chain);
    std::vector<TokenId> want_tokens(chain);
    std::vector<int32_t> want_parents = {-1, 0, 1, 2};
    std::vector<TokenId> ctx = t;
    for (int d = 0; d < 4; ++d) {
      const std::vector<float> row = test::logits_one_by_one(p->model(), ctx).back();
      std::vector<TokenId> order(row.size());
      for (size_t i = 0; i < row.size(); ++i) order[i] = static_cast<TokenId>(i);
      std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return row[a] > row[b]; });
      double sum = 0.0;
      for (float v : row) sum += std::exp(static_cast<double>(v - row[order[0]]));
      for (size_t w = 1; w < 3; ++w) {
        const double prob = std::exp(static_cast<double>(row[order[w]] - row[order[0]])) / sum;
        if (prob < 0.1) {
          ++n_dropped;
          continue;
        }
        want_tokens.push_back(order[w]);
        want_parents.push_back(d - 1);
        ++n_leaves;
      }
      ctx.push_back(chain[static_cast<size_t>(d)]);
    }
    EXPECT_EQ(tree.tokens, want_tokens) << "offset " << offset;
    EXPECT_EQ(tree.parents, want_parents) << "offset " << offset;
    p->release(RequestId(1 + offset));
  }
  EXPECT_GT(n_leaves, 0u);   // both outcomes of the rule happen here
  EXPECT_GT(n_dropped, 0u);
}

TEST(DraftProposer, AfterARejectionItProposesWhatAFreshOneWould) {
  TERN_REQUIRE_STORIES();
  auto p = make(test::draft_files().random);
  ASSERT_TRUE(p);
  std::vector<TokenId> t = prompt(30);
  for (int round = 0; round < 6; ++round) {
    const DraftRequest q{RequestId(7), t, 4};
    auto got = p->propose(std::span(&q, 1));
    ASSERT_TRUE(got.is_ok());
    auto fresh = make(test::draft_files().random);
    auto want = fresh->propose(std::span(&q, 1));
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ((*got)[0].tokens, (*want)[0].tokens) << "round " << round;
    // The target accepts `round % 3` proposals, then replaces the next one
    // with something else (or, every third round, takes all and one more).
    const auto& prop = (*got)[0].tokens;
    const size_t n_acc = round % 3 == 2 ? prop.size() : static_cast<size_t>(round % 3);
    t.insert(t.end(), prop.begin(), prop.begin() + static_cast<long>(n_acc));
    t.push_back(n_acc < prop.size() ? (prop[n_acc] + 1) % 512 : 3);
  }
}

TEST(DraftProposer, ManySequencesInOneCallProposeWhatEachWouldAlone) {
  TERN_REQUIRE_STORIES();
  auto p = make(test::draft_files().q8);
  ASSERT_TRUE(p);
  const std::vector<TokenId> a = prompt(12), b = prompt(40, 50), c = prompt(3, 100);
  const DraftRequest qs[] = {{RequestId(1), a, 3}, {RequestId(2), b, 6}, {RequestId(3), c, 1}};
  auto got = p->propose(qs);
  ASSERT_TRUE(got.is_ok());
  for (size_t i = 0; i < 3; ++i) {
    auto alone = make(test::draft_files().q8);
    auto want = alone->propose(std::span(&qs[i], 1));
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ((*got)[i].tokens, (*want)[0].tokens) << i;
    EXPECT_EQ((*got)[i].size(), static_cast<size_t>(qs[i].k));
  }
}

TEST(DraftProposer, SlotsRunOutAndComeBack) {
  TERN_REQUIRE_STORIES();
  auto p = make(test::draft_files().q8, 2);
  ASSERT_TRUE(p);
  const std::vector<TokenId> t = prompt(10);
  const DraftRequest qs[] = {{RequestId(1), t, 2}, {RequestId(2), t, 2}, {RequestId(3), t, 2}};
  auto got = p->propose(qs);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ((*got)[0].size(), 2u);
  EXPECT_EQ((*got)[1].size(), 2u);
  EXPECT_TRUE((*got)[2].empty());  // no slot: no proposals, no error
  p->release(RequestId(1));
  auto again = p->propose(std::span(&qs[2], 1));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)[0].tokens, (*got)[1].tokens);  // same tokens, same proposals
}

TEST(DraftProposer, ADraftWithAnotherVocabularyIsRefused) {
  TERN_REQUIRE_STORIES();
  auto target = gguf::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(target.is_ok());
  auto p = DraftProposer::create(test::draft_files().other_vocab, *target, backend::make_backend(BackendKind::Cpu, 1),
                                 2, 64);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("vocabulary"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace tern::spec
