#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/assert.h"
#include "kernels/elementwise.h"
#include "kernels/matmul_kernels.h"
#include "kernels/pack.h"
#include "kernels/tuning.h"

namespace tern::kernels {

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  const MatmulJob job{&w, y};
  matmul_group(&job, 1, x, n_tokens, pool);
}

namespace {
constexpr int kMaxGroup = 4;

// W8A8: a tile's outputs times their rows' scales (WeightView::row_scale),
// after the kernel, packed or not, so both give the same bits.
void scale_rows(const float* scale, int n_rows, int n_cols, float* y, size_t ldy) {
  for (int c = 0; c < n_cols; ++c)
    for (int r = 0; r < n_rows; ++r) y[c * ldy + r] *= scale[r];
}

// One distinct input of a pass: its rows quantized for one activation format.
struct ActPlan {
  const MatmulKernels* k;
  const float* x;
  int64_t n_tokens, n_cols;
  size_t stride;      // bytes of one quantized row
  size_t offset;      // into the pass's activation buffer
  int64_t first_unit; // index of its first row among all inputs' rows
};

struct JobPlan {
  const MatmulKernels* k;
  const uint8_t* xq;  // activations quantized for this job's kernel
  size_t x_stride;
  int64_t rows_per_tile;
  int64_t first_tile;  // index of this job's first tile in the combined tile list
};
}  // namespace

void matmul_group(const MatmulJob* jobs, int n_jobs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  TERN_ASSERT(n_jobs >= 1 && n_jobs <= kMaxGroup);
  ExpertMatmulJob all[kMaxGroup];
  for (int j = 0; j < n_jobs; ++j) {
    TERN_ASSERT(jobs[j].w->n_cols == jobs[0].w->n_cols);
    all[j] = {jobs[j].w, x, jobs[j].y, n_tokens};
  }
  matmul_experts(std::span<const ExpertMatmulJob>(all, static_cast<size_t>(n_jobs)), pool);
}

void matmul_experts(std::span<const ExpertMatmulJob> jobs, ThreadPool& pool) {
  // Plans on the calling thread's scratch. Workers must see the caller's
  // objects, so the lambdas below use these references (a thread_local named
  // inside a lambda would be the worker's own, empty, instance).
  thread_local std::vector<ActPlan> tls_acts;
  thread_local std::vector<JobPlan> tls_plan;
  thread_local std::vector<int> tls_job_act;
  thread_local std::vector<uint8_t> xq_buf;
  std::vector<ActPlan>& acts = tls_acts;
  std::vector<JobPlan>& plan = tls_plan;
  std::vector<int>& job_act = tls_job_act;
  acts.clear();
  plan.assign(jobs.size(), JobPlan{});
  job_act.assign(jobs.size(), -1);
  size_t act_bytes = 0;
  int64_t n_units = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const ExpertMatmulJob& job = jobs[j];
    if (job.n_tokens <= 0) continue;
    const MatmulKernels* k = matmul_kernels(job.w->traits->type);
    TERN_ASSERT(k != nullptr);
    const int64_t n = job.w->n_cols;
    // Inputs shared by neighbouring jobs (Q/K/V, gate/up) are quantized once.
    int a = static_cast<int>(acts.size()) - 1;
    const int stop = std::max(0, static_cast<int>(acts.size()) - kMaxGroup);
    for (; a >= stop; --a) {
      const ActPlan& p = acts[static_cast<size_t>(a)];
      if (p.x == job.x && p.n_tokens == job.n_tokens && p.n_cols == n && p.k->act_type == k->act_type &&
          p.k->quantize_act == k->quantize_act)
        break;
    }
    if (a < stop) {
      a = static_cast<int>(acts.size());
      acts.push_back({k, job.x, job.n_tokens, n, act_row_bytes(*k, n), act_bytes, n_units});
      act_bytes += acts.back().stride * static_cast<size_t>(job.n_tokens);
      n_units += job.n_tokens;
    }
    job_act[j] = a;
    plan[j].k = k;
    plan[j].x_stride = act_row_bytes(*k, n);
  }
  if (acts.empty()) return;
  if (xq_buf.size() < act_bytes) xq_buf.resize(act_bytes);
  uint8_t* xq = xq_buf.data();
  // A decode step's few rows (a MoE layer's k experts each quantize their own
  // row) cost less than waking the pool: quantized inline below ~32k elements.
  int64_t n_act_elems = 0;
  for (const ActPlan& p : acts) n_act_elems += p.n_tokens * p.n_cols;
  constexpr int64_t kMinParallelQuant = 1 << 15;
  const size_t quant_chunk = n_act_elems < kMinParallelQuant ? static_cast<size_t>(n_units) : 1;
  pool.parallel_for(static_cast<size_t>(n_units), [&](size_t begin, size_t end, int) {
    size_t a = 0;
    for (size_t i = begin; i < end; ++i) {
      while (a + 1 < acts.size() && static_cast<int64_t>(i) >= acts[a + 1].first_unit) ++a;
      const ActPlan& p = acts[a];
      const int64_t t = static_cast<int64_t>(i) - p.first_unit;
      p.k->quantize_act(p.x + t * p.n_cols, xq + p.offset + static_cast<size_t>(t) * p.stride, p.n_cols);
    }
  }, quant_chunk);
  // One list of row tiles over all jobs. Each thread owns a range of whole
  // tiles; within it, each job's columns go in blocks small enough for their
  // activations to stay in cache (L2 by default, MatmulKernels::act_block_bytes)
  // while every tile of that job in the range passes over them; a tile reuses
  // each loaded weight block for all its columns.
  int64_t n_tiles = 0;
  size_t min_chunk = 1, max_stride = 1;
  int64_t max_cols = 1;
  size_t act_block = SIZE_MAX;
  for (size_t j = 0; j < jobs.size(); ++j) {
    JobPlan& p = plan[j];
    p.first_tile = n_tiles;
    if (job_act[j] < 0) continue;  // no tokens: no tiles
    p.xq = xq + acts[static_cast<size_t>(job_act[j])].offset;
    p.rows_per_tile = p.k->max_rows;
    n_tiles += (jobs[j].w->n_rows + p.rows_per_tile - 1) / p.rows_per_tile;
    min_chunk = std::max<size_t>(min_chunk, 64 / p.rows_per_tile);
    max_stride = std::max(max_stride, p.x_stride);
    max_cols = std::max<int64_t>(max_cols, p.k->max_cols);
    act_block = std::min(act_block, tuned_act_block_bytes(p.k->level, jobs[j].w->traits->type, p.k->act_block_bytes));
  }
  const int64_t col_block = std::max<int64_t>(max_cols, static_cast<int64_t>(act_block / max_stride));
  pool.parallel_for(static_cast<size_t>(n_tiles), [&](size_t tile_begin, size_t tile_end, int) {
    size_t j = 0;
    for (size_t seg = tile_begin; seg < tile_end;) {
      // The run of tiles in [seg, tile_end) that belong to job j.
      while (j + 1 < jobs.size() && static_cast<int64_t>(seg) >= plan[j + 1].first_tile) ++j;
      const size_t seg_end = j + 1 < jobs.size() ? std::min(tile_end, static_cast<size_t>(plan[j + 1].first_tile)) : tile_end;
      const JobPlan& p = plan[j];
      const WeightView& w = *jobs[j].w;
      const int64_t n = w.n_cols, n_tokens = jobs[j].n_tokens;
      for (int64_t c0 = 0; c0 < n_tokens; c0 += col_block) {
        const int64_t c1 = std::min(n_tokens, c0 + col_block);
        for (size_t gt = seg; gt < seg_end; ++gt) {
          const int64_t r0 = (static_cast<int64_t>(gt) - p.first_tile) * p.rows_per_tile;
          const int n_rows = static_cast<int>(std::min(p.rows_per_tile, w.n_rows - r0));
          for (int64_t c = c0; c < c1; c += p.k->max_cols) {
            const int n_cols = static_cast<int>(std::min<int64_t>(p.k->max_cols, c1 - c));
            float* y = jobs[j].y + c * w.n_rows + r0;
            if (w.packed && p.k->packed_tile) {  // panels of 32 rows, r0 is a multiple of 32
              const auto* panel = static_cast<const uint8_t*>(w.packed) + static_cast<size_t>(r0 / 32) * packed_panel_bytes(*p.k, w);
              p.k->packed_tile(n, panel, n_rows, p.xq + c * p.x_stride, p.x_stride, n_cols, y,
                               static_cast<size_t>(w.n_rows));
            } else {
              p.k->tile(n, w.row(r0), w.row_stride_bytes, n_rows, p.xq + c * p.x_stride, p.x_stride, n_cols, y,
                        static_cast<size_t>(w.n_rows));
            }
            if (w.row_scale) scale_rows(w.row_scale + r0, n_rows, n_cols, y, static_cast<size_t>(w.n_rows));
          }
        }
      }
      seg = seg_end;
    }
  }, min_chunk);
}

void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* gate, const float* up, int64_t n) { elementwise_kernels().swiglu(gate, up, n); }

void swiglu_reference(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu(float* gate, const float* up, int64_t n) { elementwise_kernels().geglu(gate, up, n); }

// g/2 (1 + tanh v) written as g / (1 + e^-2v): the same number, without the
// cancellation of 1 + tanh v for negative g (tests check the identity).
void geglu_reference(float* gate, const float* up, int64_t n) {
  const double c = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double v = c * (g + 0.044715 * g * g * g);
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-2.0 * v)) * up[i]);
  }
}

void softcap(float* x, int64_t n, float cap) { elementwise_kernels().softcap(x, n, cap); }

void softcap_reference(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

namespace {

// YaRN: the dimension index at which a rotation completes n_rot turns over the original context.
float yarn_corr_dim(int n_dims, int orig_ctx, float n_rot, float base) {
  return n_dims * std::log(orig_ctx / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(base));
}

// Angle and magnitude scale for rotation pair i (0-based pair index).
void rope_angle(const RopeParams& p, int pair, int32_t pos, float& theta, float& mscale) {
  const float theta_base = pos * std::pow(p.freq_base, -2.0f * pair / p.n_rot);
  const float theta_extrap = p.freq_factors ? theta_base / p.freq_factors[pair] : theta_base;
  const float theta_interp = p.freq_scale * theta_extrap;
  theta = theta_interp;
  mscale = 1.0f;
  if (p.yarn_orig_ctx > 0 && p.yarn_ext_factor != 0.0f) {
    const float low = std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.yarn_orig_ctx, p.yarn_beta_fast, p.freq_base)));
    const float high = std::min(static_cast<float>(p.n_rot - 1),
                                std::ceil(yarn_corr_dim(p.n_rot, p.yarn_orig_ctx, p.yarn_beta_slow, p.freq_base)));
    const float y = (pair - low) / std::max(0.001f, high - low);
    const float ramp = 1.0f - std::clamp(y, 0.0f, 1.0f);
    const float mix = ramp * p.yarn_ext_factor;
    theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
    mscale = p.yarn_attn_factor * (1.0f + 0.1f * std::log(1.0f / p.freq_scale));
  } else {
    mscale = p.yarn_attn_factor;
  }
}

}  // namespace

void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    float theta = 0.0f, mscale = 1.0f;
    rope_angle(p, i, pos, theta, mscale);
    const float c = std::cos(theta) * mscale;
    const float s = std::sin(theta) * mscale;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int a = p.layout == RopeLayout::Normal ? 2 * i : i;
      const int b = p.layout == RopeLayout::Normal ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace tern::kernels
