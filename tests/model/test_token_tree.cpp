// Token trees in one forward pass (model/forward_input.h): every node's
// logits are the same bits as feeding its root-to-node path as an ordinary
// sequence, with the nodes stored one after another past the root, across
// block boundaries, sliding windows shorter than the tree, GQA and every KV
// type; after copy_kv moves a branch's keys/values to the places its
// positions name, decoding goes on as if that branch had been fed plainly.
// Malformed trees are refused.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "arch_checks.h"
#include "backend/backend.h"
#include "model/forward_input.h"
#include "model/model.h"
#include "plain_pools.h"
#include "synthetic_model.h"

namespace tern {
namespace {

using test::load;
using test::make_synthetic;
using test::SynthSpec;

using Pools = test::PlainPools;

// A tree past a prefix: token, parent (-1: the prefix's last token).
struct Node {
  TokenId token;
  int parent;
};

ForwardInput input_for(const Pools& pools, int n_blocks) {
  ForwardInput in;
  in.n_seqs = 1;
  in.kv.resize(pools.views.size());
  for (ForwardInput::KvGroup& g : in.kv) {
    g.table_begin = {0, n_blocks};
    for (int b = 0; b < n_blocks; ++b) g.table_data.push_back(b);
  }
  return in;
}

void add_token(ForwardInput& in, TokenId tok, int32_t pos, int32_t kv_pos, int32_t parent) {
  in.tokens.push_back(tok);
  in.positions.push_back(pos);
  in.seq.push_back(0);
  in.parent.push_back(parent);
  in.kv_pos.push_back(kv_pos);
  for (ForwardInput::KvGroup& g : in.kv) g.slots.push_back(kv_pos);  // the table is the identity
}

// Logits of the last token of `tokens` fed as one ordinary sequence.
std::vector<float> plain_last(const Model& m, KvType type, const std::vector<TokenId>& tokens, int block_size) {
  const int n_blocks = static_cast<int>(tokens.size()) / block_size + 2;
  Pools pools(m, type, block_size, n_blocks);
  ForwardInput in = input_for(pools, n_blocks);
  for (size_t i = 0; i < tokens.size(); ++i) {
    in.tokens.push_back(tokens[i]);
    in.positions.push_back(static_cast<int32_t>(i));
    in.seq.push_back(0);
    for (ForwardInput::KvGroup& g : in.kv) g.slots.push_back(static_cast<int64_t>(i));
  }
  in.logits_rows = {static_cast<int32_t>(tokens.size()) - 1};
  std::vector<float> logits;
  const Status s = m.forward(in, pools.views, logits);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return logits;
}

std::vector<TokenId> path_to(const std::vector<TokenId>& prefix, const std::vector<Node>& tree, int node) {
  std::vector<TokenId> path;
  for (int i = node; i >= 0; i = tree[static_cast<size_t>(i)].parent) path.insert(path.begin(), tree[static_cast<size_t>(i)].token);
  std::vector<TokenId> all = prefix;
  all.insert(all.end(), path.begin(), path.end());
  return all;
}

int depth_of(const std::vector<Node>& tree, int node) {
  int d = 0;
  for (int i = node; i >= 0; i = tree[static_cast<size_t>(i)].parent) ++d;
  return d;
}

// The prefix and the tree in one pass; then node `moved`'s path copied to
// its linear places and one ordinary token decoded after it.
void check_tree(const Model& m, KvType type, int block_size, const std::vector<TokenId>& prefix,
                const std::vector<Node>& tree, int moved, TokenId next) {
  const int32_t n_prefix = static_cast<int32_t>(prefix.size());
  const int n_blocks = (n_prefix + static_cast<int>(tree.size())) / block_size + 2;
  Pools pools(m, type, block_size, n_blocks);
  ForwardInput in = input_for(pools, n_blocks);
  for (int32_t i = 0; i < n_prefix; ++i) add_token(in, prefix[static_cast<size_t>(i)], i, i, -1);
  for (size_t j = 0; j < tree.size(); ++j) {
    const int p = tree[j].parent;
    add_token(in, tree[j].token, n_prefix - 1 + depth_of(tree, static_cast<int>(j)), n_prefix + static_cast<int32_t>(j),
              p < 0 ? n_prefix - 1 : n_prefix + p);
  }
  for (int32_t r = n_prefix - 1; r < static_cast<int32_t>(in.tokens.size()); ++r) in.logits_rows.push_back(r);
  std::vector<float> logits;
  const Status s = m.forward(in, pools.views, logits);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const size_t n_vocab = static_cast<size_t>(m.hparams().n_vocab);
  for (size_t j = 0; j < tree.size(); ++j) {
    const std::vector<float> want = plain_last(m, type, path_to(prefix, tree, static_cast<int>(j)), block_size);
    const std::vector<float> got(logits.begin() + static_cast<std::ptrdiff_t>((j + 1) * n_vocab),
                                 logits.begin() + static_cast<std::ptrdiff_t>((j + 2) * n_vocab));
    EXPECT_EQ(got, want) << "node " << j;
  }
  // The accepted path moved into place, then an ordinary token after it.
  std::vector<int64_t> src, dst;
  std::vector<int> chain;
  for (int i = moved; i >= 0; i = tree[static_cast<size_t>(i)].parent) chain.insert(chain.begin(), i);
  for (size_t d = 0; d < chain.size(); ++d) {
    src.push_back(n_prefix + chain[d]);
    dst.push_back(n_prefix + static_cast<int64_t>(d));
  }
  for (const KvPoolView& v : pools.views) m.backend().copy_kv(v, src, dst);
  ForwardInput in2 = input_for(pools, n_blocks);
  const int32_t pos = n_prefix + static_cast<int32_t>(chain.size());
  in2.tokens = {next};
  in2.positions = {pos};
  in2.seq = {0};
  for (ForwardInput::KvGroup& g : in2.kv) g.slots = {pos};
  in2.logits_rows = {0};
  std::vector<float> after;
  const Status s2 = m.forward(in2, pools.views, after);
  ASSERT_TRUE(s2.is_ok()) << s2.message();
  std::vector<TokenId> full = path_to(prefix, tree, moved);
  full.push_back(next);
  EXPECT_EQ(after, plain_last(m, type, full, block_size)) << "decoding after the moved branch";
}

// Depth-first with the first chain first: 0-1-2-3, siblings 4 (of 1), 5 (of
// the root), 6 (of 5), 7 (of 6), 8 (of 0).
const std::vector<Node> kTree = {{5, -1}, {9, 0}, {13, 1}, {2, 2}, {31, 0}, {7, -1}, {9, 5}, {40, 6}, {11, 0}};

TEST(TokenTree, EveryNodeIsItsPathFedPlainly) {
  SynthSpec s;
  s.n_layer = 2;
  s.n_head = 8;
  s.n_head_kv = 2;
  test::Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const std::vector<TokenId> prefix = {1, 17, 23, 3, 50, 61, 8, 19, 44, 2, 71};
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0})
    for (int bs : {4, 16}) {
      SCOPED_TRACE(testing::Message() << "kv " << static_cast<int>(type) << " block " << bs);
      check_tree(*l.model, type, bs, prefix, kTree, 7, 12);
      check_tree(*l.model, type, bs, prefix, kTree, 3, 12);  // the first chain: nothing moves
    }
}

TEST(TokenTree, SlidingWindowShorterThanTheTree) {
  SynthSpec s;
  s.arch = "gemma2";
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.tied_output = true;
  s.rms_eps = 1e-6f;
  s.sliding_window = 3;
  s.seed = 41;
  test::Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const std::vector<TokenId> prefix = {1, 17, 23, 3, 50, 61, 8};
  check_tree(*l.model, KvType::F16, 4, prefix, kTree, 7, 12);
  check_tree(*l.model, KvType::F16, 4, prefix, kTree, 8, 12);
}

TEST(TokenTree, MalformedTreesAreRefused) {
  SynthSpec s;
  test::Loaded l = load(make_synthetic(s));
  ASSERT_TRUE(l.model);
  const Model& m = *l.model;
  Pools pools(m, KvType::F32, 4, 4);
  auto base = [&] {
    ForwardInput in = input_for(pools, 4);
    add_token(in, 1, 0, 0, -1);
    add_token(in, 2, 1, 1, 0);
    add_token(in, 3, 1, 2, 0);
    in.logits_rows = {2};
    return in;
  };
  std::vector<float> logits;
  ForwardInput ok = base();
  EXPECT_TRUE(m.forward(ok, pools.views, logits).is_ok());
  ForwardInput wrong_pos = base();
  wrong_pos.positions[2] = 2;  // a child two positions past its parent
  EXPECT_FALSE(m.forward(wrong_pos, pools.views, logits).is_ok());
  ForwardInput later_parent = base();
  later_parent.parent[1] = 2;
  EXPECT_FALSE(m.forward(later_parent, pools.views, logits).is_ok());
  ForwardInput same_place = base();
  same_place.kv_pos[2] = 1;
  for (auto& g : same_place.kv) g.slots[2] = 1;
  EXPECT_FALSE(m.forward(same_place, pools.views, logits).is_ok());
  ForwardInput ordinary_after = base();
  ordinary_after.parent[2] = -1;
  ordinary_after.positions[2] = 2;
  EXPECT_FALSE(m.forward(ordinary_after, pools.views, logits).is_ok());
  ForwardInput short_parent = base();
  short_parent.parent.pop_back();
  EXPECT_FALSE(m.forward(short_parent, pools.views, logits).is_ok());
}

}  // namespace
}  // namespace tern
