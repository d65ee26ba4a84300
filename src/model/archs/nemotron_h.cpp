// nemotron_h: NVIDIA's Nemotron-H hybrid (dense; llama.cpp's nemotron_h).
// Each layer is one of three pre-norm sub-layers added to the residual
// stream, all normed by blk.N.attn_norm:
//   x += mamba2_mixer(rmsnorm(x))   head_count_kv[N] = 0, feed_forward_length[N] = 0
//   x += attention(rmsnorm(x))      head_count_kv[N] > 0: no RoPE, no biases
//   x += relu2_ffn(rmsnorm(x))      feed_forward_length[N] > 0: up, relu^2, down
// The attention layers keep K/V blocks and the mixers a state per sequence:
// the model has one KV group and one recurrent group (forward.cpp).
#include "model/arch.h"

namespace tern::archs {

void nemotron_h_block(const Pass& p, const LayerWeights& l, const LayerHParams& lh) {
  const Activations& a = p.act;
  layers::rms_norm(p, a.x, l.attn_norm, a.xn, p.n);
  if (lh.recurrent)
    layers::mamba2_mixer(p, l, a.xn, a.proj);
  else if (lh.has_kv())
    layers::attention(p, l, lh, a.xn, a.proj);
  else
    layers::relu2_ffn(p, l.ffn, a.xn, a.proj);
  layers::residual_add(p, a.x, a.proj);
}

extern const ArchInfo kNemotronH;
constinit const ArchInfo kNemotronH{.name = "nemotron_h",
                                    .rope_layout = kernels::RopeLayout::Normal,  // unused: no RoPE
                                    .reads_sliding_window = false,
                                    .reads_qkv_bias = false,
                                    .block = nemotron_h_block,
                                    .ssm_groups = true,
                                    .hybrid = true};

}  // namespace tern::archs
