// kv/seq_window.h — what one sequence keeps of its own past in the
// full-attention layers, when it keeps less than everything (StreamingLLM's
// attention sinks + a sliding window, or llama.cpp-style context shift). The
// KV manager frees what falls out; the model masks it and places the sinks.
//
//   positions  0 .. n_sink-1 | (gone) | lo(p) .. p      for the token at p
//              sinks           freed    window
//
//   lo(p) = max(kv_lo, p - window + 1)   (window 0: no sliding window;
//                                          kv_lo: context shift's cut)
//
// Keys stay rotated at their own positions (stored once, never re-rotated:
// no rounding builds up and a quantized cache is not re-encoded), so a query
// at p sees each window key at its true distance, which is also its distance
// inside the kept cache. Only the sinks would sit too far away: they are
// scored against the query rotated at p's place in the kept cache,
// sink_position(p) = p - (lo(p) - n_sink) once the window has left the
// sinks — the distances StreamingLLM prescribes ("positions within the
// cache"), at the price of one more rotated copy of the queries.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tern {

struct SeqWindow {
  int32_t n_sink = 0;  // positions [0, n_sink) are kept for good
  int32_t window = 0;  // > 0: the last `window` positions (the token itself included)
  int32_t kv_lo = 0;   // context shift: positions [n_sink, kv_lo) are gone
  int32_t shift_ctx = 0;    // > 0: context shift keeps at most this many positions' blocks
  int32_t block_size = 16;  // the KV blocks context shift counts and cuts whole
  // Positions from here on were (or will be) computed from a partial past:
  // their K/V differ from full attention's, so they never serve another
  // request as a cached prefix. A window's are those past its sinks + window;
  // context shift's those computed after its first cut.
  int32_t exact_until = INT32_MAX;

  // Lossy eviction by importance, in whole blocks, once the prompt is in:
  //   H2o     after every step, while it holds more than evict_blocks blocks,
  //           the block with the least attention mass received so far (every
  //           query, layer and head) goes, never one holding the last
  //           evict_recent positions: heavy hitters + a recent window.
  //   SnapKv  once, when the prompt is complete: the same choice with the mass
  //           the prompt's last evict_recent queries (the observation window)
  //           gave; what decode adds is kept.
  // Keys keep their rotation (true distances); a gap is read as nothing.
  enum class Evict : uint8_t { Off, H2o, SnapKv };
  Evict evict = Evict::Off;
  int32_t evict_blocks = 0;
  int32_t evict_recent = 0;
  bool evict_in_prompt = false;  // H2o: from the first chunk on (KvEvictParams::during_prompt)
  bool evicting() const { return evict != Evict::Off; }

  bool active() const { return n_sink > 0 || window > 0 || kv_lo > 0 || shift_ctx > 0; }
  // First non-sink position the token at p reads.
  int32_t lo(int32_t p) const {
    const int32_t w = window > 0 ? p - window + 1 : 0;
    return std::max({kv_lo, w, n_sink});
  }
  // Where the query at p scores the sinks from (p itself until the window leaves them).
  int32_t sink_position(int32_t p) const { return p - (lo(p) - n_sink); }
  // Context shift, before positions [n_computed, n_total) are computed: while
  // the blocks kept (the sinks', then from kv_lo's on) would hold more than
  // shift_ctx positions, the older half of what follows the sinks is cut
  // (llama.cpp's n_discard = (n_past - n_keep) / 2), up to a block boundary
  // so the cut frees whole blocks, never past n_computed (a token reads itself).
  void shift_to_fit(int32_t n_computed, int32_t n_total) {
    if (shift_ctx <= 0) return;
    const int32_t b = block_size, sink_blocks = (n_sink + b - 1) / b;
    for (;;) {
      const int32_t start = std::max(kv_lo, n_sink);
      const int32_t kept = sink_blocks + (n_total + b - 1) / b - std::max(sink_blocks, start / b);
      if (kept * b <= shift_ctx || start >= n_computed) return;
      const int32_t cut = start + std::max(1, (n_computed - start) / 2);
      kv_lo = std::min(n_computed, (cut + b - 1) / b * b);
      exact_until = std::min(exact_until, n_computed);
    }
  }
};

// Where a pass adds the attention mass a sequence's positions receive
// (kernels::attention_mass): mass[position], rows at positions >= from.
struct KvMass {
  uint64_t* mass = nullptr;  // nullptr: not collected
  int32_t from = 0;
};

}  // namespace tern
