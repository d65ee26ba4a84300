// kernels/attention_mass.cpp — the attention weights each cached position
// receives, summed for KV eviction by importance (kernels/attention.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/assert.h"
#include "kernels/attention.h"
#include "kernels/kv_quant.h"

namespace tern::kernels {

void attention_mass(const AttentionShape& s, const QueryBlock& b, int32_t from, uint64_t* mass) {
  TERN_ASSERT(b.n_sink == 0 && s.n_head % s.n_head_kv == 0);
  const int group = s.n_head / s.n_head_kv, hd = s.head_dim;
  int32_t window = s.sliding_window;
  if (b.window > 0 && (window <= 0 || b.window < window)) window = b.window;
  const size_t head_bytes = kv_head_bytes(s.kv_type, hd),
               row_bytes = head_bytes * static_cast<size_t>(s.n_head_kv);
  // Every position the runs hold, and its key row (buffers kept per thread:
  // this runs for every evicting sequence in every layer of every step).
  thread_local std::vector<int32_t> pos;
  thread_local std::vector<const char*> rows;
  thread_local std::vector<float> keys, w;
  pos.clear();
  rows.clear();
  for (const KvRun& r : b.runs)
    for (int32_t j = 0; j < r.n; ++j) {
      pos.push_back(r.pos0 + j);
      rows.push_back(static_cast<const char*>(r.k) + static_cast<size_t>(j) * row_bytes);
    }
  const size_t n = pos.size();
  keys.resize(n * static_cast<size_t>(hd));
  w.resize(n);
  for (int kvh = 0; kvh < s.n_head_kv; ++kvh) {
    for (size_t i = 0; i < n; ++i)
      kv_decode_head(s.kv_type, rows[i] + static_cast<size_t>(kvh) * head_bytes, hd, keys.data() + i * hd);
    for (int t = 0; t < b.n_q; ++t) {
      const int32_t qpos = b.pos0 + t;
      if (qpos < from) continue;
      const int32_t lo = std::max(b.kv_lo, window > 0 ? qpos - window + 1 : 0);
      // Positions ascend: the ones this row reads are [i0, i1).
      const size_t i0 = static_cast<size_t>(std::lower_bound(pos.begin(), pos.end(), lo) - pos.begin());
      const size_t i1 = static_cast<size_t>(std::upper_bound(pos.begin(), pos.end(), qpos) - pos.begin());
      if (i0 >= i1) continue;
      for (int g = 0; g < group; ++g) {
        const float* q =
            b.q + (static_cast<size_t>(t) * s.n_head + static_cast<size_t>(kvh) * group + g) * hd;
        float mx = -std::numeric_limits<float>::infinity();
        for (size_t i = i0; i < i1; ++i) {
          const float* k = keys.data() + i * hd;
          float dot = 0.0f;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          float score = dot * s.scale;
          if (s.softcap > 0.0f) score = s.softcap * std::tanh(score / s.softcap);
          w[i] = score;
          mx = std::max(mx, score);
        }
        double sum = 0.0;
        for (size_t i = i0; i < i1; ++i) sum += (w[i] = std::exp(w[i] - mx));
        const double to_fixed = kMassOne / sum;
        for (size_t i = i0; i < i1; ++i) mass[pos[i]] += static_cast<uint64_t>(w[i] * to_fixed + 0.5);
      }
    }
  }
}

}  // namespace tern::kernels
