// TokenCounts against std::map under random increments and decrements.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "sampling/token_counts.h"

namespace tern {
namespace {

void expect_same(const TokenCounts& got, const std::map<TokenId, int32_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t n_seen = 0;
  got.for_each([&](TokenId id, int32_t count) {
    ++n_seen;
    auto it = want.find(id);
    ASSERT_NE(it, want.end()) << "unexpected id " << id;
    EXPECT_EQ(count, it->second) << "id " << id;
  });
  EXPECT_EQ(n_seen, want.size());
  for (const auto& [id, count] : want) EXPECT_EQ(got.count(id), count);
}

TEST(TokenCounts, EmptyAndSimple) {
  TokenCounts c;
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.count(5), 0);
  c.increment(5);
  c.increment(5);
  c.increment(0);
  EXPECT_EQ(c.count(5), 2);
  EXPECT_EQ(c.count(0), 1);
  c.decrement(5);
  c.decrement(5);
  EXPECT_EQ(c.count(5), 0);
  EXPECT_EQ(c.size(), 1u);
}

TEST(TokenCounts, RandomOpsMatchMap) {
  // A mix of narrow and wide id ranges: narrow ranges collide in probe runs,
  // which is where backward-shift deletion can go wrong.
  for (uint32_t seed = 0; seed < 8; ++seed) {
    std::mt19937 rng(seed);
    TokenCounts got;
    std::map<TokenId, int32_t> want;
    std::vector<TokenId> live;
    const uint32_t range = seed % 2 == 0 ? 64 : 200000;
    for (int step = 0; step < 20000; ++step) {
      const bool add = live.empty() || rng() % 100 < 55;
      if (add) {
        const auto id = static_cast<TokenId>(rng() % range);
        got.increment(id);
        ++want[id];
        live.push_back(id);
      } else {
        const size_t k = rng() % live.size();
        const TokenId id = live[k];
        live[k] = live.back();
        live.pop_back();
        got.decrement(id);
        if (--want[id] == 0) want.erase(id);
      }
      if (step % 1000 == 0) expect_same(got, want);
    }
    expect_same(got, want);
  }
}

TEST(TokenCounts, DrainsToEmpty) {
  TokenCounts c;
  for (TokenId id = 0; id < 1000; ++id) c.increment(id * 16);  // same low bits
  for (TokenId id = 999; id >= 0; --id) c.decrement(id * 16);
  EXPECT_EQ(c.size(), 0u);
  size_t n = 0;
  c.for_each([&](TokenId, int32_t) { ++n; });
  EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace tern
