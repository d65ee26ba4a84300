// The Mamba-1 mixer (model/layers.h), as llama.cpp's mamba graph computes it.
#include <vector>

#include "model/layers.h"

namespace tern::layers {

void mamba_mixer(const Pass& p, const LayerWeights& l, const float* xn, float* out) {
  backend::Backend& be = p.be;
  const Activations& a = p.act;
  const SsmHParams& hs = p.hp.ssm;
  const SsmWeights& w = l.ssm;
  const int64_t n = p.n, d_inner = hs.d_inner;
  const kernels::SsmDims dims{hs.d_inner, hs.d_conv, hs.d_state};

  // Each run's state in this layer; a sequence starting at position 0 starts from zero.
  const KvPoolView& pool = p.pools[static_cast<size_t>(l.kv_group)];
  std::vector<backend::SsmRun> runs;
  std::vector<std::vector<kernels::SsmSnap>> snaps(p.runs.size());  // each run's snapshots
  runs.reserve(p.runs.size());
  for (size_t i = 0; i < p.runs.size(); ++i) {
    const TokenRun& r = p.runs[i];
    const int32_t slot = p.tables[static_cast<size_t>(l.kv_group)][static_cast<size_t>(r.seq)][0];
    float* state = pool.state(slot, l.kv_index);
    const int32_t pos0 = p.in.positions[static_cast<size_t>(r.first_token)];
    if (pos0 == 0) be.zero(state, 1, hs.state_floats());
    for (const ForwardInput::StateSnapshot& sn : p.in.snapshots)
      if (sn.seq == r.seq) {
        float* copy = pool.state(sn.slot, l.kv_index);
        snaps[i].push_back({sn.position - pos0, copy, copy + hs.conv_floats()});
      }
    runs.push_back({r.first_token, r.n_tokens, state, state + hs.conv_floats(), snaps[i]});
  }

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

}  // namespace tern::layers
