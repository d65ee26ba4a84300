// model/synth.h — a random-weight model of real shapes, for benchmarks.
//
// Writes a `llama`, `gemma2` or `gemma3` GGUF whose tensors have the shapes a
// trained model of these hyper-parameters would have, with a real vocabulary
// copied from another GGUF (every tokenizer.* key; the vocabulary size is its
// token list's length).
//   matrices  ~ N(0, weight_std) (see below), then encoded under `scheme`
//             with the same type rules and encoder as `tern quantize`
//   norms     = 1 (F32)
//   tensors   token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
//             attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm,
//             output (untied)
//   metadata  llama.* keys (rope freq base 10000, rms eps 1e-5, rope dims =
//             head size), general.file_type, general.quantization_version 2
//   gemma2/3  the keys and tensors llama.cpp's converter writes for them:
//             key/value_length (= head_dim), rms eps 1e-6, the sliding window;
//             gemma2 the soft-caps (50, 30); gemma3 rope.freq_base 1e6 and
//             rope.freq_base_swa 10000. Per layer also post_attention_norm and
//             post_ffw_norm, gemma3 attn_q_norm and attn_k_norm ([head_dim]);
//             no output tensor (tied to token_embd, as Gemma files are).
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
  std::string arch = "llama";
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;  // 0 = n_head
  int n_ff = 0;
  int head_dim = 0;   // 0 = n_embd / n_head (Gemma's real shapes have their own, e.g. 256)
  int window = 0;     // gemma2/3 attention.sliding_window; 0 = 4096 (gemma2), 1024 (gemma3)
  int n_ctx = 4096;
  uint64_t seed = 0;
  float weight_std = 0.02f;
  std::string vocab_path;  // GGUF whose tokenizer.* keys are copied
  std::string out_path;
  std::string name;        // general.name; default "synth-llama-<n_embd>x<n_layer>"
  QuantScheme scheme{};
};

// Checks the shapes (positive, heads dividing the width, KV heads dividing the
// heads, an even head size for RoPE) before reading or writing anything.
Status validate_synth_options(const SynthOptions& options);

Result<QuantizeReport> synth_model(const SynthOptions& options, ThreadPool& pool,
                                   const QuantizeProgressFn& progress = {});

}  // namespace tern
