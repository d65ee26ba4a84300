// model/gguf_names.h — every GGUF metadata key and tensor name the model
// code reads or writes, in one table (gguf_names.cpp), so a name is spelled
// once and the loader, the converters and the error messages agree.
//
//   keys     "general.architecture", then "<arch>.<suffix>" for the rest:
//            key("llama", Key::EmbeddingLength) == "llama.embedding_length"
//   tensors  global ones by name ("token_embd.weight"), per-layer ones as
//            "blk.<il>.<suffix>": tensor_name(Tensor::AttnQ, 3) == "blk.3.attn_q.weight"
//
// Names of tensors that tern knows of but does not compute with (attention
// output and FFN biases), or that only some architectures use, are in the
// table too, with a note on what they are, so "this file has tensors the
// architecture does not use" can say what the user would lose.
#pragma once

#include <string>
#include <string_view>

namespace tern::gguf_names {

inline constexpr std::string_view kArchitecture = "general.architecture";

// Keys under "<arch>.".
enum class Key {
  ContextLength,
  EmbeddingLength,
  BlockCount,
  FeedForwardLength,
  VocabSize,
  HeadCount,
  HeadCountKv,        // scalar or one value per layer
  KeyLength,
  ValueLength,
  RmsEpsilon,
  LayerNormEpsilon,
  SlidingWindow,      // scalar or one value per layer (0: full attention)
  RopeDimensionCount,
  RopeFreqBase,
  RopeScalingType,
  RopeScalingFactor,
  RopeScaleLinear,    // older files: a linear factor without a type
  RopeScalingOrigCtx,
  RopeScalingAttnFactor,
  // Gemma 2 / Gemma 3 (model/archs/gemma.cpp)
  AttnLogitSoftcap,      // cap * tanh(score / cap) on attention scores
  FinalLogitSoftcap,     // the same on the output logits
  SlidingWindowPattern,  // every n-th layer attends globally, the others over the window
  RopeFreqBaseSwa,       // RoPE base of the sliding-window (local) layers
  // Mixture of experts (llama with experts = Mixtral, qwen2moe, qwen3moe)
  ExpertCount,               // experts per MoE layer (0 or absent: a dense model)
  ExpertUsedCount,           // experts each token is routed to (top-k)
  ExpertFeedForwardLength,   // rows of one expert's gate/up (qwen2moe, qwen3moe)
  ExpertSharedFeedForwardLength,  // rows of the shared expert's gate/up (qwen2moe)
  // State-space layers (mamba)
  SsmConvKernel,    // d_conv: taps of the causal depthwise convolution
  SsmInnerSize,     // d_inner: channels of the mixer
  SsmStateSize,     // d_state: state values per channel
  SsmTimeStepRank,  // dt_rank: rows of the dt projection's input
  SsmDtBcRms,       // bool: RMS-norm dt, B and C before use (falcon-mamba)
  SsmGroupCount,    // Mamba-2: groups of heads sharing B and C
};

// "<arch>.<suffix of k>".
std::string key(std::string_view arch, Key k);

enum class Tensor {
  // global
  TokenEmbd,
  OutputNorm,
  Output,
  RopeFreqs,          // Llama 3.1+: [n_rot/2] frequency divisors
  RopeFactorsLong,    // Phi-3 LongRoPE: [n_rot/2], contexts past the original one
  RopeFactorsShort,   // Phi-3 LongRoPE: [n_rot/2], contexts within it
  // per layer
  AttnNorm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOutput,
  AttnQBias,
  AttnKBias,
  AttnVBias,
  AttnOutputBias,  // known, not computed with
  AttnQkv,         // Q, K and V rows in one matrix (phi3)
  AttnQNorm,       // [head_dim] per-head RMSNorm weight of q (qwen3, gemma3)
  AttnKNorm,       // [head_dim] per-head RMSNorm weight of k (qwen3, gemma3)
  FfnNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  // Gemma 2 / Gemma 3
  AttnPostNorm,  // norm of the attention output before the residual add
  FfnPostNorm,   // norm of the FFN output before the residual add
  // Mixture of experts: the router, the experts as 3-D tensors ([n_cols,
  // n_rows, n_expert], expert e's matrix the e-th slab of rows), and qwen2moe's
  // shared expert with its sigmoid gate ([n_embd]).
  FfnGateInp,
  FfnGateExps,
  FfnUpExps,
  FfnDownExps,
  FfnGateInpShexp,
  FfnGateShexp,
  FfnUpShexp,
  FfnDownShexp,
  // State-space (Mamba) mixer
  SsmIn,          // [n_embd] -> [2 d_inner]: x and the gate z
  SsmConv1d,      // [d_conv, d_inner] depthwise convolution taps
  SsmConv1dBias,  // [d_inner]
  SsmX,           // [d_inner] -> [dt_rank + 2 d_state]: dt, B, C
  SsmDt,          // [dt_rank] -> [d_inner]
  SsmDtBias,      // [d_inner]
  SsmA,           // [d_state, d_inner] (stored as -exp(A_log); no ".weight")
  SsmD,           // [d_inner] skip connection (no ".weight")
  SsmOut,         // [d_inner] -> [n_embd]
  SsmNorm,        // Mamba-2: [d_inner / n_group, n_group] grouped RMS norm of the gated output
};

// The tensor's name; `layer` is used (and must be >= 0) for per-layer tensors only.
std::string tensor_name(Tensor t, int layer = -1);
bool is_per_layer(Tensor t);

// What a tensor in a file is, for messages: "" when the name is not in the table.
std::string_view describe_tensor(std::string_view name);
// W8A8: the per-row scales of I8 matrix "<base>.weight" are "<base>.scale".
std::string row_scale_name(std::string_view matrix_name);

}  // namespace tern::gguf_names
