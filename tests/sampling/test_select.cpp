// Top-k / top-p selection against a full sort, including ties and masked tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "sampling/select.h"

namespace tern::detail {
namespace {

// Logits with heavy ties (few distinct values) or spread out, some masked.
std::vector<SampleCandidate> make_candidates(size_t n, uint32_t seed, bool ties) {
  std::mt19937 rng(seed);
  std::vector<SampleCandidate> c(n);
  for (size_t i = 0; i < n; ++i) {
    float l = ties ? static_cast<float>(rng() % 7) : static_cast<float>(rng() % 100000) * 1e-3f - 50.0f;
    if (rng() % 50 == 0) l = -INFINITY;
    c[i] = {static_cast<TokenId>(i), l, 0.0f};
  }
  // Shuffle so that id order says nothing about rank.
  std::shuffle(c.begin(), c.end(), rng);
  return c;
}

void set_weights(std::vector<SampleCandidate>& c, float temperature) {
  float max = -INFINITY;
  for (const auto& x : c) max = std::max(max, x.logit);
  for (auto& x : c) x.weight = std::exp((x.logit - max) / temperature);
}

std::set<TokenId> ids(std::span<const SampleCandidate> c) {
  std::set<TokenId> out;
  for (const auto& x : c) out.insert(x.id);
  return out;
}

std::vector<SampleCandidate> sorted(std::vector<SampleCandidate> c) {
  std::sort(c.begin(), c.end(), better);
  return c;
}

TEST(SamplingSelect, TopKMatchesSort) {
  for (bool ties : {false, true}) {
    for (size_t n : {size_t{1}, size_t{10}, size_t{33}, size_t{1000}, size_t{50000}}) {
      for (size_t k : {size_t{1}, size_t{2}, n / 3, n - 1, n}) {
        if (k == 0 || k > n) continue;
        std::vector<SampleCandidate> c = make_candidates(n, static_cast<uint32_t>(n + k), ties);
        const std::vector<SampleCandidate> want = sorted(c);
        select_top_k(c, k);
        EXPECT_EQ(ids(std::span(c).first(k)), ids(std::span(want).first(k))) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(SamplingSelect, TopKIsDeterministic) {
  std::vector<SampleCandidate> a = make_candidates(20000, 5, true);
  std::vector<SampleCandidate> b = a;
  select_top_k(a, 777);
  select_top_k(b, 777);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].id, b[i].id) << i;
}

TEST(SamplingSelect, TopKSortedFromLogits) {
  std::mt19937 rng(2);
  std::vector<float> logits(5000);
  for (float& l : logits) l = static_cast<float>(rng() % 300);  // many ties
  logits[17] = NAN;
  std::vector<SampleCandidate> all;
  for (size_t i = 0; i < logits.size(); ++i) {
    all.push_back({static_cast<TokenId>(i), std::isnan(logits[i]) ? -INFINITY : logits[i], 0.0f});
  }
  const std::vector<SampleCandidate> want = sorted(all);
  for (size_t k : {size_t{1}, size_t{40}, size_t{256}, size_t{5000}}) {
    std::vector<SampleCandidate> got;
    select_top_k_sorted(logits, k, got);
    ASSERT_EQ(got.size(), k);
    for (size_t i = 0; i < k; ++i) {
      EXPECT_EQ(got[i].id, want[i].id) << "k=" << k << " rank " << i;
    }
  }
}

// The nucleus by definition: the shortest best-first prefix reaching the mass.
size_t nucleus_size(const std::vector<SampleCandidate>& sorted_c, double target) {
  double cum = 0.0;
  for (size_t i = 0; i < sorted_c.size(); ++i) {
    cum += sorted_c[i].weight;
    if (cum >= target) return i + 1;
  }
  return sorted_c.size();
}

TEST(SamplingSelect, TopPMatchesSortedPrefix) {
  int n_checked = 0;
  for (bool ties : {false, true}) {
    for (size_t n : {size_t{5}, size_t{100}, size_t{3000}, size_t{60000}}) {
      for (float temperature : {0.3f, 1.0f, 20.0f}) {
        for (double p : {0.1, 0.5, 0.9, 0.99}) {
          std::vector<SampleCandidate> c = make_candidates(n, static_cast<uint32_t>(n) * 7 + ties, ties);
          set_weights(c, temperature);
          double total = 0.0;
          for (const auto& x : c) total += x.weight;
          const double target = p * total;
          const std::vector<SampleCandidate> want = sorted(c);
          const size_t n_want = nucleus_size(want, target);
          // Skip targets within rounding of a prefix sum: summation order may
          // legitimately move the cut by one there.
          double before = 0.0;
          for (size_t i = 0; i + 1 < n_want; ++i) before += want[i].weight;
          if (std::abs(before + want[n_want - 1].weight - target) < 1e-9 * total ||
              std::abs(before - target) < 1e-9 * total) {
            continue;
          }
          float max = want[0].logit;
          std::vector<SampleCandidate> exact = c;
          std::vector<SampleCandidate> bucketed = c;
          const size_t n_exact = select_top_p_exact(exact, target);
          const size_t n_bucketed = select_top_p(bucketed, target, max, temperature);
          const std::set<TokenId> want_ids = ids(std::span(want).first(n_want));
          EXPECT_EQ(n_exact, n_want) << "n=" << n << " t=" << temperature << " p=" << p;
          EXPECT_EQ(ids(std::span(exact).first(n_exact)), want_ids);
          EXPECT_EQ(n_bucketed, n_want) << "n=" << n << " t=" << temperature << " p=" << p;
          EXPECT_EQ(ids(std::span(bucketed).first(n_bucketed)), want_ids);
          ++n_checked;
        }
      }
    }
  }
  EXPECT_GT(n_checked, 80);
}

TEST(SamplingSelect, TopPFullMassKeepsEverythingWithWeight) {
  std::vector<SampleCandidate> c = make_candidates(4000, 3, false);
  set_weights(c, 1.0f);
  double total = 0.0;
  for (const auto& x : c) total += x.weight;
  const size_t n = select_top_p(c, total * 2.0, sorted(c)[0].logit, 1.0f);  // unreachable
  EXPECT_EQ(n, c.size());
}

}  // namespace
}  // namespace tern::detail
