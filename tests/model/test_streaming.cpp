// A sequence's own window in the forward pass (model/forward_input.h
// windows, kv/seq_window.h): StreamingLLM's "positions within the cache".
//
// With one layer, a token's keys and values depend only on the token and its
// position, and RoPE scores depend only on distances. So the last row of a
// streaming sequence (sinks + window, the gap's blocks freed) must give the
// logits of a plain sequence made of what it keeps — the sinks, then the
// window — fed densely from position 0: an independent check of where the
// sinks are placed (their query rotation), of the masking and of the freed
// blocks never being read. The same holds for context shift (kv_lo).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "arch_checks.h"
#include "backend/backend.h"
#include "model/forward_input.h"
#include "model/model.h"
#include "plain_pools.h"
#include "synthetic_model.h"

namespace tern {
namespace {

constexpr int kBlock = 8;

// Pools of kBlock-position blocks.
struct Pools : test::PlainPools {
  Pools(const Model& m, KvType type, int n_blocks) : PlainPools(m, type, kBlock, n_blocks) {}
};

// One pass of tokens [from, to) of one sequence; table entry b is pool block b
// unless `freed` says the KV manager gave it back (-1: any read would assert).
std::vector<float> pass(const Model& m, Pools& pools, const std::vector<TokenId>& tokens, int32_t from, int32_t to,
                        const SeqWindow* win, const std::vector<bool>& freed, bool all_rows) {
  ForwardInput in;
  in.n_seqs = 1;
  in.kv.resize(pools.views.size());
  const int n_blocks = pools.views.front().n_blocks;
  for (ForwardInput::KvGroup& g : in.kv) {
    g.table_begin = {0, n_blocks};
    for (int b = 0; b < n_blocks; ++b) g.table_data.push_back(freed[static_cast<size_t>(b)] ? -1 : b);
  }
  for (int32_t p = from; p < to; ++p) {
    in.tokens.push_back(tokens[static_cast<size_t>(p)]);
    in.positions.push_back(p);
    in.seq.push_back(0);
    for (ForwardInput::KvGroup& g : in.kv) g.slots.push_back(p);
    if (all_rows || p == to - 1) in.logits_rows.push_back(p - from);
  }
  if (win) in.windows = {*win};
  std::vector<float> logits;
  const Status s = m.forward(in, pools.views, logits);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return logits;
}

// What the sequence keeps for its token at t, as a plain token list.
std::vector<TokenId> kept(const std::vector<TokenId>& tokens, const SeqWindow& w, int32_t t) {
  std::vector<TokenId> out(tokens.begin(), tokens.begin() + std::min(w.n_sink, t + 1));
  for (int32_t p = w.lo(t); p <= t; ++p) out.push_back(tokens[static_cast<size_t>(p)]);
  return out;
}

std::vector<float> dense_last(const Model& m, const std::vector<TokenId>& seq) {
  Pools pools(m, KvType::F32, static_cast<int>(seq.size()) / kBlock + 1);
  return pass(m, pools, seq, 0, static_cast<int32_t>(seq.size()), nullptr,
              std::vector<bool>(static_cast<size_t>(pools.views.front().n_blocks), false), false);
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// A prompt of n_prompt in one pass (every row its own window), then decode
// one token at a time to n_total, the gap's blocks freed as the KV manager
// would; each decoded row against the dense run of what it keeps.
void check_against_compacted(const SeqWindow& w, int n_prompt, int n_total) {
  test::SynthSpec spec;
  spec.n_layer = 1;
  spec.n_ctx_train = 1024;
  const test::Loaded loaded = test::load(test::make_synthetic(spec));
  ASSERT_TRUE(loaded.model);
  const Model& m = *loaded.model;
  std::mt19937 rng(7);
  std::vector<TokenId> tokens(static_cast<size_t>(n_total));
  for (TokenId& t : tokens) t = static_cast<TokenId>(rng() % 100);
  Pools pools(m, KvType::F32, n_total / kBlock + 1);
  std::vector<bool> freed(static_cast<size_t>(pools.views.front().n_blocks), false);
  pass(m, pools, tokens, 0, n_prompt, &w, freed, true);
  float worst = 0, spread = 0;
  for (int32_t t = n_prompt; t < n_total; ++t) {
    const int32_t sink_blocks = (w.n_sink + kBlock - 1) / kBlock;
    for (int32_t b = sink_blocks; b < std::min(t, w.lo(t)) / kBlock; ++b) freed[static_cast<size_t>(b)] = true;
    const std::vector<float> got = pass(m, pools, tokens, t, t + 1, &w, freed, false);
    const std::vector<float> want = dense_last(m, kept(tokens, w, t));
    worst = std::max(worst, max_diff(got, want));
    for (float x : want) spread = std::max(spread, std::fabs(x));
  }
  EXPECT_LT(worst, 2e-3f * std::max(1.0f, spread)) << "logits differ from the dense run of what is kept";
  // And the run is not trivially equal to the dense run of everything.
  const std::vector<float> full = dense_last(m, tokens);
  const std::vector<float> last = pass(m, pools, tokens, n_total - 1, n_total, &w, freed, false);
  EXPECT_GT(max_diff(full, last), 1e-2f) << "the window changes nothing here: the test could not catch it ignored";
}

TEST(Streaming, SinksAndWindowScoreAsTheKeptTokensFedDensely) { check_against_compacted({4, 24, 0}, 30, 90); }

TEST(Streaming, WindowOnlyScoresAsTheWindowFedDensely) { check_against_compacted({0, 20, 0}, 10, 70); }

TEST(Streaming, SinksOverSeveralBlocks) { check_against_compacted({11, 17, 0}, 40, 80); }

TEST(Streaming, ContextShiftScoresAsTheKeptTokensFedDensely) {
  check_against_compacted({4, 0, 37}, 40, 70);  // positions [4, 37) cut
}

}  // namespace
}  // namespace tern
