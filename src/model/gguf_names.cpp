#include "model/gguf_names.h"

#include <iterator>

#include "core/assert.h"

namespace tern::gguf_names {
namespace {

struct KeyRow {
  Key key;
  std::string_view suffix;
};

// Names as llama.cpp's gguf-py constants spell them (the files we read come from its converters).
constexpr KeyRow kKeys[] = {
    {Key::ContextLength, "context_length"},
    {Key::EmbeddingLength, "embedding_length"},
    {Key::BlockCount, "block_count"},
    {Key::FeedForwardLength, "feed_forward_length"},
    {Key::VocabSize, "vocab_size"},
    {Key::HeadCount, "attention.head_count"},
    {Key::HeadCountKv, "attention.head_count_kv"},
    {Key::KeyLength, "attention.key_length"},
    {Key::ValueLength, "attention.value_length"},
    {Key::RmsEpsilon, "attention.layer_norm_rms_epsilon"},
    {Key::LayerNormEpsilon, "attention.layer_norm_epsilon"},
    {Key::SlidingWindow, "attention.sliding_window"},
    {Key::RopeDimensionCount, "rope.dimension_count"},
    {Key::RopeFreqBase, "rope.freq_base"},
    {Key::RopeScalingType, "rope.scaling.type"},
    {Key::RopeScalingFactor, "rope.scaling.factor"},
    {Key::RopeScaleLinear, "rope.scale_linear"},
    {Key::RopeScalingOrigCtx, "rope.scaling.original_context_length"},
    {Key::RopeScalingAttnFactor, "rope.scaling.attn_factor"},
    {Key::AttnLogitSoftcap, "attn_logit_softcapping"},
    {Key::FinalLogitSoftcap, "final_logit_softcapping"},
    {Key::SlidingWindowPattern, "attention.sliding_window_pattern"},
    {Key::RopeFreqBaseSwa, "rope.freq_base_swa"},
    {Key::ExpertCount, "expert_count"},
    {Key::ExpertUsedCount, "expert_used_count"},
    {Key::ExpertFeedForwardLength, "expert_feed_forward_length"},
    {Key::ExpertSharedFeedForwardLength, "expert_shared_feed_forward_length"},
    {Key::SsmConvKernel, "ssm.conv_kernel"},
    {Key::SsmInnerSize, "ssm.inner_size"},
    {Key::SsmStateSize, "ssm.state_size"},
    {Key::SsmTimeStepRank, "ssm.time_step_rank"},
    {Key::SsmDtBcRms, "ssm.dt_b_c_rms"},
    {Key::SsmGroupCount, "ssm.group_count"},
};

struct TensorRow {
  Tensor tensor;
  bool per_layer;          // "blk.<il>." + suffix
  std::string_view suffix;
  std::string_view what;   // for messages about tensors a file has and tern does not use
};

constexpr TensorRow kTensors[] = {
    {Tensor::TokenEmbd, false, "token_embd.weight", "token embedding"},
    {Tensor::OutputNorm, false, "output_norm.weight", "final norm"},
    {Tensor::Output, false, "output.weight", "output projection"},
    {Tensor::RopeFreqs, false, "rope_freqs.weight", "per-dimension RoPE frequency factors (Llama 3.1 rope scaling)"},
    {Tensor::RopeFactorsLong, false, "rope_factors_long.weight", "LongRoPE factors for long contexts (Phi-3)"},
    {Tensor::RopeFactorsShort, false, "rope_factors_short.weight", "LongRoPE factors for short contexts (Phi-3)"},
    {Tensor::AttnNorm, true, "attn_norm.weight", "attention norm"},
    {Tensor::AttnQ, true, "attn_q.weight", "query projection"},
    {Tensor::AttnK, true, "attn_k.weight", "key projection"},
    {Tensor::AttnV, true, "attn_v.weight", "value projection"},
    {Tensor::AttnOutput, true, "attn_output.weight", "attention output projection"},
    {Tensor::AttnQBias, true, "attn_q.bias", "query bias"},
    {Tensor::AttnKBias, true, "attn_k.bias", "key bias"},
    {Tensor::AttnVBias, true, "attn_v.bias", "value bias"},
    {Tensor::AttnOutputBias, true, "attn_output.bias", "attention output bias, not implemented"},
    {Tensor::AttnQkv, true, "attn_qkv.weight", "fused query/key/value projection"},
    {Tensor::AttnQNorm, true, "attn_q_norm.weight", "per-head query norm"},
    {Tensor::AttnKNorm, true, "attn_k_norm.weight", "per-head key norm"},
    {Tensor::FfnNorm, true, "ffn_norm.weight", "feed-forward norm"},
    {Tensor::FfnGate, true, "ffn_gate.weight", "feed-forward gate projection"},
    {Tensor::FfnUp, true, "ffn_up.weight", "feed-forward up projection"},
    {Tensor::FfnDown, true, "ffn_down.weight", "feed-forward down projection"},
    {Tensor::AttnPostNorm, true, "post_attention_norm.weight", "attention output norm (Gemma)"},
    {Tensor::FfnPostNorm, true, "post_ffw_norm.weight", "feed-forward output norm (Gemma)"},
    {Tensor::FfnGateInp, true, "ffn_gate_inp.weight", "MoE router"},
    {Tensor::FfnGateExps, true, "ffn_gate_exps.weight", "MoE expert gate projections"},
    {Tensor::FfnUpExps, true, "ffn_up_exps.weight", "MoE expert up projections"},
    {Tensor::FfnDownExps, true, "ffn_down_exps.weight", "MoE expert down projections"},
    {Tensor::FfnGateInpShexp, true, "ffn_gate_inp_shexp.weight", "MoE shared-expert gate"},
    {Tensor::FfnGateShexp, true, "ffn_gate_shexp.weight", "MoE shared-expert gate projection"},
    {Tensor::FfnUpShexp, true, "ffn_up_shexp.weight", "MoE shared-expert up projection"},
    {Tensor::FfnDownShexp, true, "ffn_down_shexp.weight", "MoE shared-expert down projection"},
    {Tensor::SsmIn, true, "ssm_in.weight", "state-space input projection"},
    {Tensor::SsmConv1d, true, "ssm_conv1d.weight", "state-space convolution"},
    {Tensor::SsmConv1dBias, true, "ssm_conv1d.bias", "state-space convolution bias"},
    {Tensor::SsmX, true, "ssm_x.weight", "state-space dt/B/C projection"},
    {Tensor::SsmDt, true, "ssm_dt.weight", "state-space time-step projection"},
    {Tensor::SsmDtBias, true, "ssm_dt.bias", "state-space time-step bias"},
    {Tensor::SsmA, true, "ssm_a", "state-space A matrix"},
    {Tensor::SsmD, true, "ssm_d", "state-space skip (D)"},
    {Tensor::SsmOut, true, "ssm_out.weight", "state-space output projection"},
    {Tensor::SsmNorm, true, "ssm_norm.weight", "state-space grouped norm"},
};

const TensorRow& row_of(Tensor t) {
  for (const TensorRow& r : kTensors)
    if (r.tensor == t) return r;
  TERN_ASSERT_MSG(false, "tensor missing from the name table");
  return kTensors[0];
}

constexpr std::string_view kLayerPrefix = "blk.";

}  // namespace

std::string key(std::string_view arch, Key k) {
  for (const KeyRow& r : kKeys)
    if (r.key == k) return std::string(arch) + "." + std::string(r.suffix);
  TERN_ASSERT_MSG(false, "key missing from the name table");
  return {};
}

std::string tensor_name(Tensor t, int layer) {
  const TensorRow& r = row_of(t);
  if (!r.per_layer) return std::string(r.suffix);
  TERN_ASSERT(layer >= 0);
  return std::string(kLayerPrefix) + std::to_string(layer) + "." + std::string(r.suffix);
}

bool is_per_layer(Tensor t) { return row_of(t).per_layer; }

std::string_view describe_tensor(std::string_view name) {
  std::string_view suffix = name;
  if (name.starts_with(kLayerPrefix)) {
    const size_t dot = name.find('.', kLayerPrefix.size());
    if (dot == std::string_view::npos) return {};
    suffix = name.substr(dot + 1);
  }
  for (const TensorRow& r : kTensors)
    if (r.suffix == suffix && r.per_layer == name.starts_with(kLayerPrefix)) return r.what;
  return {};
}

std::string row_scale_name(std::string_view matrix_name) {
  const std::string_view base =
      matrix_name.ends_with(".weight") ? matrix_name.substr(0, matrix_name.size() - 7) : matrix_name;
  return std::string(base) + ".scale";
}

}  // namespace tern::gguf_names
