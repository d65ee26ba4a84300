// kernels/attention.h — causal multi-head attention over a KV cache, tiled
// with an online softmax (FlashAttention-style): no score matrix larger than
// one tile (query rows x kKvTile positions) ever exists.
//
// Queries come in blocks: n_q consecutive tokens of one sequence at positions
// pos0 .. pos0+n_q-1, each with n_head heads. Keys/values of that sequence are
// reached through runs of positions stored contiguously (a contiguous cache
// gives one run, a paged cache one per block). Query heads that share a KV
// head (GQA) are processed together so each key/value row is loaded once for
// the whole group.
//
// Parallelism: work items are (query block, KV heads, KV segment), segments
// being fixed 512-position ranges, so a long context with few query rows
// (decode) still spreads over all threads (flash-decoding). An item takes all
// KV heads (each cached row read once, whole) unless that leaves too few items
// for the threads, when the heads are split between items. Partial results
// carry their running max and sum and are merged afterwards. Every boundary
// (segments, 64-position score tiles) sits at an absolute position, so a
// query row's result is bit-identical whatever else is in the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv_format.h"
#include "core/thread_pool.h"
#include "kernels/cpu_features.h"

namespace tern::kernels {

// Positions [pos0, pos0 + n) of one sequence: rows of n_head_kv head slices
// encoded as AttentionShape::kv_type (core/kv_format.h).
struct KvRun {
  const void* k;
  const void* v;
  int32_t pos0;
  int32_t n;
};

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  float scale = 1.0f;       // usually 1/sqrt(head_dim)
  int sliding_window = 0;   // 0 = full causal; else attend to positions > pos - sliding_window
  KvType kv_type = KvType::F32;  // how keys/values are stored
  // 0 = off; else each scaled score becomes softcap * tanh(score / softcap)
  // before the softmax (Gemma 2's attn_logit_softcapping). Off costs nothing:
  // the kernels are compiled with and without it and pick once per call.
  float softcap = 0.0f;
};

struct QueryBlock {
  const float* q;           // [n_q][n_head][head_dim]
  float* out;               // [n_q][n_head][head_dim]
  int n_q;
  int32_t pos0;
  std::vector<KvRun> runs;  // covering at least the positions the block may attend to, ascending
  // The sequence's own limits (streaming, model/streaming.h); zeros = off.
  // A row at position p attends to [lo, p] with lo the largest of kv_lo,
  // p - window + 1 (window > 0) and the shape's sliding-window start, and
  // also to the sink positions [0, n_sink), which it scores with its row of
  // q_sink (the query rotated at its place in the kept cache) instead of q.
  // With n_sink > 0 the sinks are always their own partial (split at n_sink
  // whatever the rows), so a row's arithmetic never depends on its batch.
  int32_t n_sink = 0;
  int32_t window = 0;
  int32_t kv_lo = 0;
  const float* q_sink = nullptr;  // [n_q][n_head][head_dim] when n_sink > 0
};

struct AttentionKernels;
// kernels: a specific level's table (tests); nullptr = the best for this CPU.
void attention(const AttentionShape& shape, std::span<QueryBlock> blocks, ThreadPool& pool,
               const AttentionKernels* kernels = nullptr);

// Scalar, one-query-at-a-time reference with a full softmax: the oracle for tests.
void attention_reference(const AttentionShape& shape, std::span<QueryBlock> blocks);

// Importance for KV eviction (H2O, SnapKV; kv/seq_window.h): for every query
// row of `block` at a position >= from and every head, adds the softmax weight
// it gives each position it reads (the block's runs, causal, the layer's
// sliding window; no sinks) to mass[position], in fixed point (kMassOne = a
// weight of 1). Integer sums do not depend on the order rows, heads and layers
// arrive in, so what a sequence evicts does not depend on its batch or chunks.
// Keys are decoded to floats (a quantized cache's scores are approximate here).
constexpr double kMassOne = 16777216.0;  // 2^24: 64-bit sums hold 2^40 rows x heads x layers
void attention_mass(const AttentionShape& shape, const QueryBlock& block, int32_t from, uint64_t* mass);

// Plain view of a query block for the per-level kernels (no std:: types cross
// into code compiled for a specific CPU level).
struct QueryBlockView {
  const float* q;
  int n_q;
  int32_t pos0;
  const KvRun* runs;
  int n_runs;
  // With a q8_0 cache: each query head rounded once per call (core/kv_format.h),
  // per head (t * n_head + h): hd codes, the same as floats, one scale and
  // 128 * the codes' sum per group.
  const int8_t* q8_codes = nullptr;
  const float* q8_floats = nullptr;
  const float* q8_scales = nullptr;
  const int32_t* q8_sums128 = nullptr;
};

// Positions per score tile; tiles sit on absolute multiples of this, whatever
// the runs look like, so results do not depend on the cache layout.
constexpr int kAttentionTile = 64;
constexpr int kMaxHeadDim = 512;  // head sizes the kernels accept
constexpr size_t attention_scratch_floats(int head_dim) { return 2u * kAttentionTile * static_cast<size_t>(head_dim); }

// Tile kernel table (one per CPU level).
struct AttentionKernels {
  // Accumulates, for query rows of KV heads [kv_head0, kv_head0 + n_kv_heads),
  // each head's unnormalised output o, running max m and running sum l over
  // positions [kv_begin, kv_end). Rows: row = t * group + g for token t < n_q
  // and head g < group of a KV head. out: per head in turn, o [rows][head_dim]
  // then m [rows] then l [rows] (rows = n_q * group); initialise m = -inf,
  // l = 0, o = 0. A head's results are the same bits whichever heads share
  // its call. scratch: attention_scratch_floats(head_dim) floats.
  void (*partial)(const AttentionShape& shape, const QueryBlockView& block, int kv_head0, int n_kv_heads,
                  int32_t kv_begin, int32_t kv_end, float* out, float* scratch);
};
const AttentionKernels& attention_kernels();
// The table compiled for `level`, or nullptr when this CPU cannot run it.
const AttentionKernels* attention_kernels_at(CpuLevel level);

}  // namespace tern::kernels
