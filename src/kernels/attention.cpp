#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "core/assert.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_quant.h"

namespace tern::kernels {

extern const AttentionKernels kAttention_scalar;
#if defined(__x86_64__)
extern const AttentionKernels kAttention_avx2;
extern const AttentionKernels kAttention_avx512;
#elif defined(__aarch64__)
extern const AttentionKernels kAttention_neon;
#endif

const AttentionKernels* attention_kernels_at(CpuLevel level) {
  if (!cpu_supports(level)) return nullptr;
  switch (level) {
#if defined(__x86_64__)
    case CpuLevel::Avx512: return &kAttention_avx512;
    case CpuLevel::Avx2: return &kAttention_avx2;
#elif defined(__aarch64__)
    // One table for the three levels: the compiler's NEON code (the integer
    // dot-product instructions only matter to the matmul kernels).
    case CpuLevel::Neon:
    case CpuLevel::NeonDot:
    case CpuLevel::NeonI8mm: return &kAttention_neon;
#endif
    default: break;
  }
  return &kAttention_scalar;
}

const AttentionKernels& attention_kernels() { return *attention_kernels_at(best_cpu_level()); }

namespace {

constexpr int32_t kSplitPositions = 512;  // KV positions per work item (flash-decoding split)

QueryBlockView view_of(const QueryBlock& b) {
  return {b.q, b.n_q, b.pos0, b.runs.data(), static_cast<int>(b.runs.size())};
}

// A q8_0 or q4_0 cache's query rows (QueryBlockView::q8_*), every block's, made once
// per call: every work item and tile of a head then reads the same codes.
struct QueryCodes {
  std::vector<int8_t> codes;
  std::vector<float> floats, scales;
  std::vector<int32_t> sums128;
  std::vector<size_t> head0;  // per block: its first head's index

  // sink: the blocks' q_sink rows (q where a block has no sinks) instead of q.
  void build(const AttentionShape& s, std::span<QueryBlock> blocks, ThreadPool& pool, bool sink = false) {
    const int hd = s.head_dim, g = kv_group_elems(s.kv_type, hd), n_groups = hd / g;
    size_t n_heads = 0;
    head0.clear();
    for (const QueryBlock& b : blocks) {
      head0.push_back(n_heads);
      n_heads += static_cast<size_t>(b.n_q) * s.n_head;
    }
    codes.resize(n_heads * hd);
    floats.resize(n_heads * hd);
    scales.resize(n_heads * n_groups);
    sums128.resize(n_heads * n_groups);
    // Heads in parallel when a prompt brings many (a decode step's few are
    // cheaper than waking the pool); block ib holds heads [head0[ib], head0[ib + 1]).
    auto run = [&](size_t begin, size_t end, int) {
      size_t ib = static_cast<size_t>(std::upper_bound(head0.begin(), head0.end(), begin) - head0.begin()) - 1;
      for (size_t k = begin; k < end; ++k) {
        while (ib + 1 < head0.size() && head0[ib + 1] <= k) ++ib;
        const QueryBlock& b = blocks[ib];
        int8_t* c = codes.data() + k * hd;
        const float* q = sink && b.n_sink > 0 ? b.q_sink : b.q;
        quantize_query(q + (k - head0[ib]) * hd, hd, c, scales.data() + k * n_groups);
        for (int i = 0; i < hd; ++i) floats[k * hd + i] = static_cast<float>(c[i]);
        for (int gi = 0; gi < n_groups; ++gi) {
          int32_t sum = 0;
          for (int i = gi * g; i < (gi + 1) * g; ++i) sum += c[i];
          sums128[k * n_groups + gi] = 128 * sum;
        }
      }
    };
    if (n_heads * static_cast<size_t>(hd) < 16384)
      run(0, n_heads, 0);
    else
      pool.parallel_for(n_heads, run);
  }
  void point(const AttentionShape& s, size_t ib, QueryBlockView& v) const {
    const int hd = s.head_dim, n_groups = hd / kv_group_elems(s.kv_type, hd);
    v.q8_codes = codes.data() + head0[ib] * hd;
    v.q8_floats = floats.data() + head0[ib] * hd;
    v.q8_scales = scales.data() + head0[ib] * n_groups;
    v.q8_sums128 = sums128.data() + head0[ib] * n_groups;
  }
};

// The shape a block's non-sink positions are scored with: the layer's
// sliding window narrowed to the sequence's own window.
AttentionShape block_shape(const AttentionShape& s, const QueryBlock& b) {
  AttentionShape r = s;
  if (b.window > 0 && (r.sliding_window <= 0 || b.window < r.sliding_window)) r.sliding_window = b.window;
  return r;
}

// First non-sink position any query of the block may attend to (bs: block_shape).
int32_t first_position(const AttentionShape& bs, const QueryBlock& b) {
  int32_t p = bs.sliding_window > 0 ? std::max(0, b.pos0 - bs.sliding_window + 1) : 0;
  return std::max({p, b.kv_lo, b.n_sink});
}

// Non-sink segments of a block, appended to `out`: kSplitPositions ranges
// from `begin` to its last query, cut where its runs leave a gap (a sequence
// whose blocks were evicted by importance, kv/seq_window.h): a gap holds
// nothing to read. Without gaps: every absolute kSplitPositions range met.
void main_segments(int32_t begin, const QueryBlock& b, std::vector<std::pair<int32_t, int32_t>>& out) {
  const int32_t end = b.pos0 + b.n_q;
  auto split = [&](int32_t lo, int32_t hi) {
    for (int32_t p = lo; p < hi; p = (p / kSplitPositions + 1) * kSplitPositions)
      out.emplace_back(p, std::min(hi, (p / kSplitPositions + 1) * kSplitPositions));
  };
  int32_t lo = -1, hi = -1;  // the covered interval being extended
  for (const KvRun& r : b.runs) {
    const int32_t a = std::max(begin, r.pos0), c = std::min(end, r.pos0 + r.n);
    if (a >= c) continue;
    if (a != hi) {
      if (lo >= 0) split(lo, hi);
      lo = a;
    }
    hi = c;
  }
  if (lo >= 0) split(lo, hi);
}

struct WorkItem {
  int block;
  int kv_head0, n_kv_heads;
  int32_t kv_begin, kv_end;
  size_t scratch;  // offset of this item's first head's o (then m, l, then the next head's) in the scratch buffer
  bool sink;       // the block's sink positions, scored with q_sink
};

}  // namespace

void attention(const AttentionShape& s, std::span<QueryBlock> blocks, ThreadPool& pool,
               const AttentionKernels* kernels) {
  TERN_ASSERT(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0 && s.head_dim > 0 && s.head_dim <= kMaxHeadDim);
  const int group = s.n_head / s.n_head_kv;
  const int hd = s.head_dim;
  const size_t base_items = blocks.size() * s.n_head_kv;

  // KV positions are split at absolute multiples of kSplitPositions. Fixed
  // boundaries keep every query row's arithmetic identical however the batch
  // was composed (batch invariance), while long contexts still yield enough
  // items for every thread (flash-decoding).
  // A block with sinks has one more segment, its sinks, first.
  std::vector<int> n_splits(blocks.size(), 1);
  // Per block: its non-sink segments, ranges[range0[ib] ..]; block_shape.
  thread_local std::vector<std::pair<int32_t, int32_t>> ranges;
  ranges.clear();
  std::vector<size_t> range0(blocks.size());
  std::vector<AttentionShape> shapes(blocks.size());
  AttentionShape sink_shape = s;
  sink_shape.sliding_window = 0;  // sinks stay visible to every row
  size_t segments = 0;
  bool any_sink = false;
  for (size_t ib = 0; ib < blocks.size(); ++ib) {
    const QueryBlock& b = blocks[ib];
    TERN_ASSERT(b.n_sink == 0 || b.q_sink);
    shapes[ib] = block_shape(s, b);
    range0[ib] = ranges.size();
    main_segments(first_position(shapes[ib], b), b, ranges);
    n_splits[ib] = static_cast<int>(ranges.size() - range0[ib]) + (b.n_sink > 0 ? 1 : 0);
    any_sink = any_sink || b.n_sink > 0;
    segments += static_cast<size_t>(n_splits[ib]);
  }
  // An item runs all KV heads of its segment (a cached row is read once,
  // whole) unless there would be fewer than two items per thread; then the
  // heads are split. How they are grouped changes no head's arithmetic.
  const size_t want = 2 * static_cast<size_t>(pool.n_threads());
  const int chunks = segments >= want ? 1 : static_cast<int>(std::min<size_t>(s.n_head_kv, (want + segments - 1) / segments));
  const int per_item = (s.n_head_kv + chunks - 1) / chunks;
  // slot[first_slot[ib] + h * n_splits[ib] + sp]: where head h's partial of
  // segment sp of block ib lies in the scratch buffer.
  std::vector<WorkItem> items;
  std::vector<size_t> slot(segments * s.n_head_kv), first_slot(blocks.size());
  size_t scratch_floats = 0, n_slots = 0;
  for (size_t ib = 0; ib < blocks.size(); ++ib) {
    const QueryBlock& b = blocks[ib];
    const int32_t end = b.pos0 + b.n_q;
    const int n_sink_segs = b.n_sink > 0 ? 1 : 0;
    const size_t rows = static_cast<size_t>(b.n_q) * group;
    first_slot[ib] = n_slots;
    for (int h0 = 0; h0 < s.n_head_kv; h0 += per_item) {
      const int nh = std::min(per_item, s.n_head_kv - h0);
      for (int sp = 0; sp < n_splits[ib]; ++sp) {
        const bool sink = sp < n_sink_segs;
        int32_t lo = 0, hi = std::min(end, b.n_sink);
        if (!sink) std::tie(lo, hi) = ranges[range0[ib] + static_cast<size_t>(sp - n_sink_segs)];
        items.push_back({static_cast<int>(ib), h0, nh, lo, hi, scratch_floats, sink});
        for (int h = h0; h < h0 + nh; ++h) {
          slot[n_slots + static_cast<size_t>(h) * n_splits[ib] + sp] = scratch_floats;
          scratch_floats += rows * (hd + 2);
        }
      }
    }
    n_slots += static_cast<size_t>(n_splits[ib]) * s.n_head_kv;
  }
  thread_local std::vector<float> scratch;  // per item: o [rows][hd], m [rows], l [rows]
  thread_local std::vector<float> tiles;    // per thread: one f32 key/value tile
  if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
  const size_t tile_floats = attention_scratch_floats(hd);
  if (tiles.size() < tile_floats * pool.n_threads()) tiles.resize(tile_floats * pool.n_threads());
  float* const base = scratch.data();
  float* const tile_base = tiles.data();
  const AttentionKernels& k = kernels ? *kernels : attention_kernels();
  thread_local QueryCodes q8_rows, q8_sink_rows;
  // The caller's instances: a thread_local named inside the workers' lambda would be theirs.
  QueryCodes* const q8 = kv_is_int(s.kv_type) ? &q8_rows : nullptr;
  QueryCodes* const q8_sink = q8 && any_sink ? &q8_sink_rows : nullptr;
  if (q8) q8->build(s, blocks, pool);
  if (q8_sink) q8_sink->build(s, blocks, pool, true);

  pool.parallel_for(items.size(), [&](size_t begin, size_t end, int tid) {
    for (size_t i = begin; i < end; ++i) {
      const WorkItem& it = items[i];
      const QueryBlock& b = blocks[it.block];
      const size_t rows = static_cast<size_t>(b.n_q) * group;
      float* const out = base + it.scratch;
      for (int h = 0; h < it.n_kv_heads; ++h) {
        float* o = out + h * rows * (hd + 2);
        float* m = o + rows * hd;
        std::fill(o, m, 0.0f);
        std::fill(m, m + rows, -std::numeric_limits<float>::infinity());
        std::fill(m + rows, m + 2 * rows, 0.0f);
      }
      QueryBlockView v = view_of(b);
      if (it.sink) v.q = b.q_sink;
      if (q8) (it.sink ? q8_sink : q8)->point(s, static_cast<size_t>(it.block), v);
      k.partial(it.sink ? sink_shape : shapes[static_cast<size_t>(it.block)], v, it.kv_head0, it.n_kv_heads,
                it.kv_begin, it.kv_end, out, tile_base + tile_floats * tid);
    }
  });

  // Merge the splits of each (block, head): rescale every partial to the
  // common max, then normalise once.
  pool.parallel_for(base_items, [&](size_t begin, size_t end, int) {
    for (size_t bh = begin; bh < end; ++bh) {
      const int ib = static_cast<int>(bh / s.n_head_kv), h = static_cast<int>(bh % s.n_head_kv);
      const QueryBlock& b = blocks[ib];
      const int splits = n_splits[ib];
      const size_t rows = static_cast<size_t>(b.n_q) * group;
      const size_t* partials = slot.data() + first_slot[ib] + static_cast<size_t>(h) * splits;
      for (size_t row = 0; row < rows; ++row) {
        float mx = -std::numeric_limits<float>::infinity();
        for (int sp = 0; sp < splits; ++sp) {
          const float* o = base + partials[sp];
          mx = std::max(mx, o[rows * hd + row]);
        }
        const int t = static_cast<int>(row / group), g = static_cast<int>(row % group);
        float* out = b.out + (static_cast<size_t>(t) * s.n_head + h * group + g) * hd;
        std::fill(out, out + hd, 0.0f);
        float denom = 0.0f;
        for (int sp = 0; sp < splits; ++sp) {
          const float* o = base + partials[sp];
          const float m = o[rows * hd + row], l = o[rows * hd + rows + row];
          if (l == 0.0f) continue;
          const float w = std::exp(m - mx);
          denom += l * w;
          for (int i = 0; i < hd; ++i) out[i] += w * o[row * hd + i];
        }
        if (denom > 0.0f)
          for (int i = 0; i < hd; ++i) out[i] /= denom;
      }
    }
  });
}

namespace {
// Head slice h of row j of a run into x, decoded by the scalar codec.
void kv_head(const AttentionShape& s, const void* base, int32_t j, int h, float* x) {
  const size_t head = kv_head_bytes(s.kv_type, s.head_dim);
  kv_decode_head(s.kv_type, static_cast<const char*>(base) + (static_cast<size_t>(j) * s.n_head_kv + h) * head,
                 s.head_dim, x);
}
}  // namespace

void attention_reference(const AttentionShape& s, std::span<QueryBlock> blocks) {
  const int group = s.n_head / s.n_head_kv;
  const int hd = s.head_dim;
  for (QueryBlock& b : blocks) {
    const AttentionShape bs = block_shape(s, b);
    for (int t = 0; t < b.n_q; ++t) {
      const int32_t qpos = b.pos0 + t;
      const int32_t lo = std::max(bs.sliding_window > 0 ? qpos - bs.sliding_window + 1 : 0, b.kv_lo);
      for (int h = 0; h < s.n_head; ++h) {
        const size_t row = (static_cast<size_t>(t) * s.n_head + h) * hd;
        std::vector<double> w;
        std::vector<float> k(static_cast<size_t>(hd)), vs;  // vs: the value rows attended to, decoded
        // q8_0: the query's codes and scales, the keys' (core/kv_format.h's score rule).
        const bool q8 = kv_is_int(s.kv_type);
        const int g = q8 ? kv_group_elems(s.kv_type, hd) : hd;
        std::vector<int8_t> qc(static_cast<size_t>(hd)), kc(qc.size());
        std::vector<float> qd(static_cast<size_t>(hd)), kd(qd.size());
        std::vector<int8_t> sqc(qc.size());
        std::vector<float> sqd(qd.size());
        if (q8) kv_quantize_query(b.q + row, hd, qc.data(), qd.data());
        if (q8 && b.n_sink > 0) kv_quantize_query(b.q_sink + row, hd, sqc.data(), sqd.data());
        for (const KvRun& run : b.runs)
          for (int32_t j = 0; j < run.n; ++j) {
            const int32_t pos = run.pos0 + j;
            const bool sink = pos < b.n_sink;
            if (pos > qpos || (pos < lo && !sink)) continue;
            const float* q = (sink ? b.q_sink : b.q) + row;
            const std::vector<int8_t>& qcodes = sink ? sqc : qc;
            const std::vector<float>& qscales = sink ? sqd : qd;
            double dot = 0;
            if (q8) {  // core/kv_format.h: per group, d_key * d_query * the integer dot product
              const size_t head = kv_head_bytes(s.kv_type, hd);
              kv_codes(s.kv_type, static_cast<const char*>(run.k) + (static_cast<size_t>(j) * s.n_head_kv + h / group) * head,
                       hd, kc.data(), kd.data());
              for (int i0 = 0; i0 < hd; i0 += g) {
                int64_t ints = 0;
                for (int i = i0; i < i0 + g; ++i) ints += int64_t{qcodes[static_cast<size_t>(i)]} * kc[static_cast<size_t>(i)];
                dot += static_cast<double>(kd[static_cast<size_t>(i0 / g)]) * qscales[static_cast<size_t>(i0 / g)] * static_cast<double>(ints);
              }
            } else {
              kv_head(s, run.k, j, h / group, k.data());
              for (int i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * k[static_cast<size_t>(i)];
            }
            const double score = dot * s.scale;
            w.push_back(s.softcap > 0.0f ? s.softcap * std::tanh(score / s.softcap) : score);
            vs.resize(vs.size() + static_cast<size_t>(hd));
            kv_head(s, run.v, j, h / group, vs.data() + vs.size() - static_cast<size_t>(hd));
          }
        const double mx = w.empty() ? 0.0 : *std::max_element(w.begin(), w.end());
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        float* out = b.out + row;
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (size_t j = 0; j < w.size(); ++j) acc += w[j] * vs[j * static_cast<size_t>(hd) + static_cast<size_t>(i)];
          out[i] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
        }
      }
    }
  }
}

}  // namespace tern::kernels
