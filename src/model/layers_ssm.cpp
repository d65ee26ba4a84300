// The Mamba-1 mixer (model/layers.h), as llama.cpp's mamba graph computes it.
#include <vector>

#include "model/layers.h"

namespace tern::layers {

namespace {

// Each run of the pass with its state in layer l (a sequence starting at
// position 0 starts from zero) and the snapshots the pass takes inside it.
struct StateRuns {
  std::vector<backend::SsmRun> runs;
  std::vector<std::vector<kernels::SsmSnap>> snaps;  // each run's
};

void state_runs(const Pass& p, const LayerWeights& l, StateRuns& out) {
  const SsmHParams& hs = p.hp.ssm;
  const KvPoolView& pool = p.pools[static_cast<size_t>(l.kv_group)];
  out.snaps.assign(p.runs.size(), {});
  out.runs.clear();
  out.runs.reserve(p.runs.size());
  for (size_t i = 0; i < p.runs.size(); ++i) {
    const TokenRun& r = p.runs[i];
    const int32_t slot = p.tables[static_cast<size_t>(l.kv_group)][static_cast<size_t>(r.seq)][0];
    float* state = pool.state(slot, l.kv_index);
    const int32_t pos0 = p.in.positions[static_cast<size_t>(r.first_token)];
    if (pos0 == 0) p.be.zero(state, 1, hs.state_floats());
    for (const ForwardInput::StateSnapshot& sn : p.in.snapshots)
      if (sn.seq == r.seq) {
        float* copy = pool.state(sn.slot, l.kv_index);
        out.snaps[i].push_back({sn.position - pos0, copy, copy + hs.conv_floats()});
      }
    out.runs.push_back({r.first_token, r.n_tokens, state, state + hs.conv_floats(), out.snaps[i]});
  }
}

}  // namespace

void mamba_mixer(const Pass& p, const LayerWeights& l, const float* xn, float* out) {
  backend::Backend& be = p.be;
  const Activations& a = p.act;
  const SsmHParams& hs = p.hp.ssm;
  const SsmWeights& w = l.ssm;
  const int64_t n = p.n, d_inner = hs.d_inner;
  const kernels::SsmDims dims{hs.d_inner, hs.d_conv, hs.d_state};
  StateRuns sr;
  state_runs(p, l, sr);
  const std::span<const backend::SsmRun> runs = sr.runs;

  be.matmul(w.in, xn, a.ssm_xz, n);
  be.ssm_conv(dims, runs, a.ssm_xz, 2 * d_inner, w.conv.dev, w.conv_bias.dev, a.ssm_conv);
  const backend::MatmulJob x_jobs[] = {{&w.x_dt, a.ssm_dt_in}, {&w.x_bc, a.ssm_bc}};
  be.matmul_group(x_jobs, a.ssm_conv, n);
  if (hs.dt_b_c_rms) {  // B and C of a token are two rows of d_state
    be.rms_norm(a.ssm_dt_in, w.ones.dev, a.ssm_dt_in, n, hs.dt_rank, p.hp.rms_eps);
    be.rms_norm(a.ssm_bc, w.ones.dev, a.ssm_bc, 2 * n, hs.d_state, p.hp.rms_eps);
  }
  be.matmul(w.dt, a.ssm_dt_in, a.ssm_dt, n);
  be.add_bias(a.ssm_dt, w.dt_bias.dev, n, d_inner);
  backend::SsmScanInput in;
  in.x = a.ssm_conv;
  in.dt = a.ssm_dt;
  in.a = w.a.dev;
  in.b = a.ssm_bc;
  in.c = a.ssm_bc + hs.d_state;
  in.bc_stride = 2 * int64_t{hs.d_state};
  in.d = w.d.dev;
  in.z = a.ssm_xz + d_inner;
  in.z_stride = 2 * d_inner;
  be.ssm_scan(dims, runs, in, a.ssm_y);
  be.matmul(w.out, a.ssm_y, out, n);
}

// Mamba-2: one projection gives z, x·B·C and dt; the convolution runs over
// x, B and C together; the scan has per-head dt, A, D (kernels/ssm.h); the
// gated output is RMS-normed per group of d_inner / n_group channels.
void mamba2_mixer(const Pass& p, const LayerWeights& l, const float* xn, float* out) {
  backend::Backend& be = p.be;
  const Activations& a = p.act;
  const SsmHParams& hs = p.hp.ssm;
  const SsmWeights& w = l.ssm;
  const int64_t n = p.n, d_inner = hs.d_inner, n_ch = hs.conv_channels(), rows = hs.in_rows();
  StateRuns sr;
  state_runs(p, l, sr);
  const std::span<const backend::SsmRun> runs = sr.runs;

  be.matmul(w.in, xn, a.ssm_xz, n);  // [z | x, B, C | dt] per token
  be.ssm_conv({static_cast<int>(n_ch), hs.d_conv, hs.d_state}, runs, a.ssm_xz + d_inner, rows, w.conv.dev,
              w.conv_bias.dev, a.ssm_conv);
  const int64_t bc = int64_t{hs.n_group} * hs.d_state;
  backend::SsmScanInput in;
  in.x = a.ssm_conv;
  in.x_stride = n_ch;
  in.dt = a.ssm_xz + d_inner + n_ch;
  in.dt_stride = rows;
  in.a = w.a.dev;
  in.b = a.ssm_conv + d_inner;
  in.c = a.ssm_conv + d_inner + bc;
  in.bc_stride = n_ch;
  in.d = w.d.dev;
  in.z = a.ssm_xz;
  in.z_stride = rows;
  in.head_dim = hs.head_dim();
  in.n_group = hs.n_group;
  in.dt_bias = w.dt_bias.dev;
  be.ssm_scan({hs.d_inner, hs.d_conv, hs.d_state}, runs, in, a.ssm_y);
  if (hs.n_group == 1) {
    be.rms_norm(a.ssm_y, w.norm.dev, a.ssm_y, n, d_inner, p.hp.rms_eps);
  } else {  // rows of one group, then each group's weights
    be.rms_norm(a.ssm_y, w.ones.dev, a.ssm_y, n * hs.n_group, d_inner / hs.n_group, p.hp.rms_eps);
    be.mul(a.ssm_y, w.norm.dev, n, d_inner);
  }
  be.matmul(w.out, a.ssm_y, out, n);
}

}  // namespace tern::layers
