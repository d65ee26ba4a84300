// mamba: Mamba-1 (state-spaces/mamba-*, falcon-mamba) and mamba2: Mamba-2
// (state-spaces/mamba2-*, Mamba-Codestral), every layer a pre-norm selective
// state-space mixer added to the residual stream, no attention and no FFN:
//   x += mixer(rmsnorm(x) * attn_norm)
// with Mamba-2's mixer when the file has heads and groups (ssm.group_count).
// The tensor and key names are llama.cpp's (ssm_in, ssm_conv1d, ssm_x,
// ssm_dt, ssm_a, ssm_d, ssm_norm, ssm_out; <arch>.ssm.*).
#include "model/arch.h"

namespace tern::archs {

void mamba_block(const Pass& p, const LayerWeights& l, const LayerHParams&) {
  const Activations& a = p.act;
  layers::rms_norm(p, a.x, l.attn_norm, a.xn, p.n);
  if (p.hp.ssm.mamba2())
    layers::mamba2_mixer(p, l, a.xn, a.proj);
  else
    layers::mamba_mixer(p, l, a.xn, a.proj);
  layers::residual_add(p, a.x, a.proj);
}

extern const ArchInfo kMamba;
extern const ArchInfo kMamba2;
// No RoPE (the layout is never used), no attention keys.
constinit const ArchInfo kMamba{.name = "mamba",
                                .rope_layout = kernels::RopeLayout::Normal,
                                .reads_sliding_window = false,
                                .reads_qkv_bias = false,
                                .block = mamba_block,
                                .state_space = true};
constinit const ArchInfo kMamba2{.name = "mamba2",
                                 .rope_layout = kernels::RopeLayout::Normal,
                                 .reads_sliding_window = false,
                                 .reads_qkv_bias = false,
                                 .block = mamba_block,
                                 .state_space = true,
                                 .ssm_groups = true};

}  // namespace tern::archs
