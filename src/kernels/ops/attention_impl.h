// kernels/ops/attention_impl.h — the attention tile kernel, written once in
// plain C++ and compiled once per CPU level (attention_<level>.cpp), where the
// compiler vectorises the head_dim loops for that level. Everything here has
// internal linkage (anonymous namespace) so the per-level copies never mix.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

// No std:: templates or inline library functions are used below: a copy
// instantiated in an AVX-compiled file could be picked by the linker for
// baseline code (one-definition rule), breaking CPUs without AVX.
namespace tern::kernels {
namespace {

constexpr float kNegInf = -__builtin_inff();
inline float max_f(float a, float b) { return a > b ? a : b; }
inline int32_t min_i(int32_t a, int32_t b) { return a < b ? a : b; }
inline int32_t max_i(int32_t a, int32_t b) { return a > b ? a : b; }

// Sums in a fixed order: kLanes independent partial sums, then a fixed tree.
// (A compiler-vectorised reduction may peel for alignment, which would make a
// row's result depend on where its buffer happens to sit, i.e. on the batch.)
constexpr int kLanes = 16;

inline float reduce_lanes(const float* acc) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) t[i] += t[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

inline float dot_fixed(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i + j < n; ++j) acc[j] += a[i + j] * b[i + j];
  return reduce_lanes(acc);
}

constexpr int kKvTile = 64;     // positions per score tile
constexpr int kMaxRows = 64;    // query rows (tokens x grouped heads) per pass

// exp for softmax weights: arguments are <= 0. A polynomial with range
// reduction (2^k * e^r) that vectorises, accurate to ~1e-7 relative.
inline float fast_exp(float x) {
  x = max_f(x, -87.0f);
  const float k = __builtin_nearbyintf(x * 1.44269504088896341f);
  const float r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  return p * scale;
}

void attention_partial_impl(const AttentionShape& s, const QueryBlockView& b, int kv_head, int32_t kv_begin,
                            int32_t kv_end, float* o, float* m, float* l) {
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const int n_rows_total = b.n_q * group;
  const int row_elems = s.n_head_kv * hd;
  float scores[kMaxRows][kKvTile];
  for (int row0 = 0; row0 < n_rows_total; row0 += kMaxRows) {
    const int n_rows = min_i(kMaxRows, n_rows_total - row0);
    for (int ir = 0; ir < b.n_runs; ++ir) {
      const KvRun& run = b.runs[ir];
      const int32_t run_begin = max_i(kv_begin, run.pos0);
      const int32_t run_end = min_i(kv_end, run.pos0 + run.n);
      // Tiles sit on absolute multiples of kKvTile (cut by run ends), so which
      // positions share a tile never depends on how the batch was formed.
      for (int32_t p0 = run_begin; p0 < run_end;) {
        const int n_pos = min_i((p0 / kKvTile + 1) * kKvTile, run_end) - p0;
        const float* k0 = run.k + static_cast<size_t>(p0 - run.pos0) * row_elems + kv_head * hd;
        const float* v0 = run.v + static_cast<size_t>(p0 - run.pos0) * row_elems + kv_head * hd;
        for (int r = 0; r < n_rows; ++r) {
          const int row = row0 + r;
          const int t = row / group, g = row % group;
          const int32_t qpos = b.pos0 + t;
          const int32_t lo = s.sliding_window > 0 ? qpos - s.sliding_window + 1 : 0;
          const float* q = b.q + (static_cast<size_t>(t) * s.n_head + kv_head * group + g) * hd;
          float* sc = scores[r];
          float tile_max = kNegInf;
          for (int j = 0; j < n_pos; ++j) {
            const int32_t pos = p0 + j;
            if (pos > qpos || pos < lo) {
              sc[j] = kNegInf;
              continue;
            }
            const float* k = k0 + static_cast<size_t>(j) * row_elems;
            sc[j] = dot_fixed(q, k, hd) * s.scale;
            tile_max = max_f(tile_max, sc[j]);
          }
          if (tile_max == kNegInf) continue;  // fully masked tile
          const float m_new = max_f(m[row], tile_max);
          const float corr = fast_exp(m[row] - m_new);  // 0 when m was -inf
          for (int j = 0; j < n_pos; ++j) sc[j] = sc[j] == kNegInf ? 0.0f : fast_exp(sc[j] - m_new);
          float lanes[kLanes] = {};
          for (int j = 0; j < n_pos; ++j) lanes[j % kLanes] += sc[j];
          const float sum = reduce_lanes(lanes);
          float* orow = o + static_cast<size_t>(row) * hd;
          for (int i = 0; i < hd; ++i) orow[i] *= corr;
          for (int j = 0; j < n_pos; ++j) {
            const float p = sc[j];
            if (p == 0.0f) continue;
            const float* v = v0 + static_cast<size_t>(j) * row_elems;
            for (int i = 0; i < hd; ++i) orow[i] += p * v[i];
          }
          l[row] = l[row] * corr + sum;
          m[row] = m_new;
        }
        p0 += n_pos;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
