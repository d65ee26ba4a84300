// model/forward_input.h — one forward pass's input as plain data: what the
// model runner builds from a scheduler output and the KV manager's block
// tables, and what the model reads. The model never allocates, reserves or
// copies KV: every token arrives with the slot its keys/values go to, and
// every sequence with the block table its attention reads through.
//
//   tokens/positions/seq   [n_tokens]  batch order; a sequence's tokens are
//                                      consecutive and in position order
//   kv[g].slots            [n_tokens]  slot (block * block_size + offset) in
//                                      KV group g's pool for each token
//   kv[g].table(s)         [n_blocks]  sequence s's block table in group g;
//                                      it must cover every position its
//                                      tokens attend to
//   logits_rows            [n_out]     tokens whose logits are returned, in
//                                      this order (any number per sequence)
//   hidden_rows            [n_hidden]  tokens whose final hidden state (after
//                                      the output norm) is returned: embeddings
//
// Token trees (speculative verification of several continuations at once):
//   parent                 [n_tokens]  or empty (no trees). -1: an ordinary
//                                      token, attending to every position of
//                                      its sequence up to its own. Else the
//                                      batch index (< t, same sequence) of the
//                                      token it follows: it attends to its
//                                      parent's context, the parent and itself
//                                      only, and its position is the parent's
//                                      + 1. A tree is rooted at an ordinary
//                                      token; after a tree token of a sequence
//                                      only tree tokens of it follow.
//   windows                [n_seqs]    or empty: what each sequence keeps of
//                                      its past in full-attention layers
//                                      (kv/seq_window.h: sinks, window,
//                                      context shift); its freed blocks are
//                                      never read
//   kv_mass                [n_seqs]    or empty: where each sequence's full-
//                                      attention layers add the attention
//                                      weights its positions receive (KV
//                                      eviction by importance)
//   snapshots              [any]       recurrent layers: after the token at
//                                      position - 1 of sequence seq, its state
//                                      is also copied to state slot `slot` of
//                                      every recurrent group (a prompt's state
//                                      kept for prefix caching)
//   kv_pos                 [n_tokens]  or empty (= positions): the index in the
//                                      sequence's block table where the token's
//                                      keys/values are stored. Siblings share a
//                                      position but not a place: a tree's nodes
//                                      go one after another past its root.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/seq_window.h"

namespace tern {

struct ForwardInput {
  struct KvGroup {
    std::vector<int64_t> slots;        // [n_tokens]
    std::vector<int32_t> table_data;   // every sequence's block table, one after another
    std::vector<int32_t> table_begin;  // [n_seqs + 1] offsets into table_data
    std::span<const int32_t> table(int32_t seq) const {
      return {table_data.data() + table_begin[static_cast<size_t>(seq)],
              static_cast<size_t>(table_begin[static_cast<size_t>(seq) + 1] - table_begin[static_cast<size_t>(seq)])};
    }
  };

  std::vector<TokenId> tokens;       // [n_tokens]
  std::vector<int32_t> positions;    // [n_tokens]
  std::vector<int32_t> seq;          // [n_tokens] index of the token's sequence, < n_seqs
  int32_t n_seqs = 0;
  std::vector<KvGroup> kv;           // [the model's KV groups]
  std::vector<int32_t> logits_rows;  // [n_out] token indices
  std::vector<int32_t> hidden_rows;  // [n_hidden] token indices
  std::vector<int32_t> parent;       // [n_tokens] or empty: token trees (above)
  std::vector<int32_t> kv_pos;       // [n_tokens] or empty: where K/V are stored (above)
  std::vector<SeqWindow> windows;    // [n_seqs] or empty: every sequence keeps everything
  std::vector<KvMass> kv_mass;       // [n_seqs] or empty: where attention mass is summed (kv/seq_window.h)
  struct StateSnapshot {
    int32_t seq = 0;       // index of the sequence in this pass
    int32_t position = 0;  // the state after positions < position; one of the sequence's tokens is position - 1
    int32_t slot = 0;      // state slot written
  };
  std::vector<StateSnapshot> snapshots;  // recurrent layers only
  // The context one sequence may reach, which the runner was sized for:
  // parameters that depend on it (LongRoPE's long or short factors) follow it,
  // as llama.cpp's follow n_ctx_seq. 0: the model's training context. Set once
  // by the runner; clear() keeps it.
  int32_t n_ctx_seq = 0;

  size_t n_tokens() const { return tokens.size(); }
  // Keeps capacity (the runner refills one input every step).
  void clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    n_seqs = 0;
    for (KvGroup& g : kv) {
      g.slots.clear();
      g.table_data.clear();
      g.table_begin.clear();
    }
    logits_rows.clear();
    hidden_rows.clear();
    parent.clear();
    kv_pos.clear();
    windows.clear();
    kv_mass.clear();
    snapshots.clear();
  }
  // The index in the sequence's block table of token t's keys/values.
  int32_t kv_index(size_t t) const { return kv_pos.empty() ? positions[t] : kv_pos[t]; }
};

}  // namespace tern
