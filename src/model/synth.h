// model/synth.h — a random-weight model of real shapes, for benchmarks.
//
// Writes a GGUF whose tensors have the names and shapes llama.cpp's converter
// writes for a trained model of these hyper-parameters, with a real
// vocabulary copied from another GGUF (every tokenizer.* key; the vocabulary
// size is its token list's length). Architectures (--arch):
//   llama   token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
//           attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm,
//           output (untied); rope freq base 1e4, rms eps 1e-5
//   llama3  written as "llama", plus rope_freqs.weight: Llama 3.1's
//           frequency divisors (factor 8, low/high frequency factors 1 and 4
//           over an original context of 8192, as Meta's rope_scaling
//           defines them); rope freq base 5e5
//   qwen3   llama's tensors plus blk.N.attn_{q,k}_norm ([head size]);
//           attention.key_length / value_length written; base 1e6, eps 1e-6
//   phi3    blk.N.attn_qkv ([q; k; v] rows) in place of attn_q/k/v,
//           blk.N.ffn_up of 2 ffn rows ([gate; up]) and no ffn_gate;
//           rope.scaling.original_context_length = min(ctx, 4096) and, when
//           ctx exceeds it, LongRoPE's rope_factors_{long,short} and
//           rope.scaling.attn_factor sqrt(1 + ln(ctx/orig) / ln(orig)), as
//           the converter computes it; sliding_window 0 (none, as Phi-4)
//   gemma2/3  key/value_length (= head_dim), rms eps 1e-6, the sliding window;
//           gemma2 the soft-caps (50, 30) and no RoPE keys; gemma3
//           rope.freq_base 1e6 and rope.freq_base_swa 10000. Per layer also
//           post_attention_norm and post_ffw_norm, gemma3 attn_q_norm and
//           attn_k_norm ([head_dim]); no output tensor (tied to token_embd,
//           as Gemma files are)
//   mixtral   written as "llama" with llama.expert_count / expert_used_count:
//           per layer blk.N.ffn_gate_inp ([n_embd, n_expert], F32 as the
//           quantizer leaves routers) and 3-D ffn_{gate,up}_exps ([n_embd,
//           ffn, n_expert]) and ffn_down_exps ([ffn, n_embd, n_expert]) in
//           place of ffn_gate/up/down
//   qwen2moe  the same experts, expert_feed_forward_length wide (and written),
//           plus ffn_{gate,up,down}_shexp (expert_shared_feed_forward_length
//           wide) and ffn_gate_inp_shexp ([n_embd], random); attn_{q,k,v}.bias
//           (zeros); base 1e6, eps 1e-6
//   qwen3moe  qwen3's attention and keys with qwen2moe's experts (no shared one)
//   mamba     Mamba-1 of llama.cpp's names and Mamba's own shapes and
//           initialisation: d_inner 2 dim, d_conv 4, d_state --ssm-state
//           (16), dt_rank ceil(dim / 16); per layer attn_norm, ssm_in,
//           ssm_conv1d (+bias, uniform in +-0.5 as PyTorch initialises a
//           4-tap conv), ssm_x, ssm_dt (+bias: softplus^-1 of time steps
//           spread log-uniformly over [0.001, 0.1]), ssm_a = -(1..d_state)
//           per channel (-exp(A_log) of S4D-real), ssm_d = 1, ssm_out; no
//           head or FFN keys (--heads, --ffn not taken); ssm_conv1d, ssm_a
//           and ssm_d stay F32 as llama.cpp's quantizer keeps them
//   mamba2    Mamba-2 of llama.cpp's names and Mamba-2's shapes and
//           initialisation: d_inner 2 dim, d_conv 4, d_state --ssm-state
//           (128), heads of --head-dim (64) channels, --ssm-groups (1);
//           per layer attn_norm, ssm_in ([z, x, B, C, dt] rows), ssm_conv1d
//           (+bias, uniform in +-0.5) over x, B and C, ssm_dt.bias
//           (softplus^-1 of time steps log-uniform over [0.001, 0.1]),
//           ssm_a = -(1..16 spread over the heads), ssm_d = 1, ssm_norm = 1,
//           ssm_out
//   nemotron_h  Nemotron-H's hybrid stack (llama.cpp's nemotron_h): one layer
//           per character of --layer-pattern (default "M-M*-" repeated to
//           --layers): M a Mamba-2 mixer as mamba2 writes it (heads of
//           --ssm-head-dim, default 64), * an attention (attn_q/k/v/output of
//           --heads / --kv-heads, --head-dim; no RoPE), - an FFN of --ffn rows
//           (ffn_up, ffn_down; relu^2, no gate); every layer has attn_norm.
//           head_count_kv and feed_forward_length are per-layer arrays (0
//           where the layer has none), with key_length, value_length and
//           layer_norm_epsilon, as the converter writes them
//   matrices  ~ N(0, weight_std) (see below), then encoded under `scheme`
//             with the same type rules and encoder as `tern quantize`
//   norms     = 1 (F32); RoPE factor vectors as above (F32)
//   metadata  <arch>.* keys (rope dims = head size), general.file_type,
//             general.quantization_version 2
//
// Values: row r of tensor T draws from its own xoshiro256** stream seeded from
// (seed, hash of T's name, r), so the file is a pure function of the options:
// the same seed gives identical bytes on any number of threads. Each weight is
// a sum of four 16-bit uniforms rescaled to mean 0 and standard deviation
// weight_std (Irwin-Hall: bell-shaped, bounded at ±3.46 std): an exact
// variance at the cost of one 64-bit draw per weight, far cheaper than
// Box-Muller's log/sqrt/cos, which nothing a benchmark measures can tell apart.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/quant_rules.h"
#include "model/quantize.h"

namespace tern {

struct SynthOptions {
  std::string arch = "llama";  // llama, llama3, qwen3, phi3, gemma2, gemma3, mixtral, qwen2moe, qwen3moe, mamba, mamba2, nemotron_h (see above)
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;  // 0 = n_head
  int head_dim = 0;   // 0 = n_embd / n_head; else written as attention.key_length (Qwen3 128, Gemma 256)
  int n_ff = 0;
  int n_expert = 0;       // mixtral/qwen2moe/qwen3moe: experts per layer (required)
  int n_expert_used = 0;  // top-k (required, <= n_expert)
  int n_ff_exp = 0;       // qwen*moe expert width; 0 = n_ff / n_expert_used
  int n_ff_shexp = 0;     // qwen2moe shared expert width; 0 = n_ff
  int window = 0;     // gemma2/3 attention.sliding_window; 0 = 4096 (gemma2), 1024 (gemma3)
  int d_state = 0;    // mamba, mamba2: ssm.state_size; 0 = 16 (mamba), 128 (mamba2)
  int n_group = 0;    // mamba2, nemotron_h: ssm.group_count; 0 = 1
  int ssm_head_dim = 0;  // mamba2 (also --head-dim), nemotron_h: the mixer's head width; 0 = 64
  std::string layer_pattern;  // nemotron_h: M mixer, * attention, - FFN per layer; "" = "M-M*-" repeated
  int n_ctx = 4096;
  uint64_t seed = 0;
  float weight_std = 0.02f;
  std::string vocab_path;  // GGUF whose tokenizer.* keys are copied
  std::string out_path;
  std::string name;        // general.name; default "synth-<arch>-<n_embd>x<n_layer>"
  QuantScheme scheme{};
};

// Checks the architecture and the shapes (positive, heads dividing the width
// unless a head size is given, KV heads dividing the heads, an even head size
// for RoPE) before reading or writing anything.
Status validate_synth_options(const SynthOptions& options);

// A tensor whose F32 rows come from `source` (dims = {row length, n_rows},
// or {n} for a 1-D one), encoded as `scheme`'s rules choose for its name —
// what synth_model and synth_embed_model write.
TensorJob generated_tensor_job(const QuantScheme& scheme, const QuantModelInfo& model, const std::string& name,
                               std::vector<uint64_t> dims, RowSource source);

Result<QuantizeReport> synth_model(const SynthOptions& options, ThreadPool& pool,
                                   const QuantizeProgressFn& progress = {});

}  // namespace tern
