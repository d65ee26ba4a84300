// model/synth_embed.h — a wide model that predicts exactly what a small one
// does (`tern synth --embed SMALL.gguf`), for benchmarks that need real
// predictions at a real model's cost (speculative decoding's acceptance,
// quantization's agreement).
//
// The small model's residual stream becomes the first d of D dimensions;
// every weight that would write elsewhere is zero, so the padding stays
// exactly zero and the extra heads, FFN rows and layers add nothing:
//   token_embd, output   small rows, zero-padded to D columns
//   attn_q/k/v           small head h -> big head (its KV group's first
//                        heads), small rotary pair i -> big pair i * r where
//                        r = big head size / small head size (the same
//                        frequency: base^(-2i/hs) = base^(-2ir/Hs)); Q scaled
//                        by sqrt(r) so 1/sqrt(Hs) scores equal 1/sqrt(hs)
//                        ones (a power of two, exact in F16, when r is a
//                        power of 4); every other row zero
//   attn_output          columns mapped back the same way; rows >= d zero
//   ffn_gate/up/down     small rows/columns, zero beyond
//   norms                small weights * sqrt(d / D) (RMS over D dims is
//                        sqrt(d/D) times the RMS over d when the rest are
//                        zero), zero beyond d; rms eps scaled by d / D too
//   extra layers         norms 1, every matrix zero: they cost a full layer
//                        and contribute nothing
// The small model must be a plain llama (no biases, no RoPE scaling, rotary
// size = head size, normal RoPE layout); the big shape must hold it: D >= d,
// layers >= L, ffn >= its ffn, kv-heads >= its kv-heads, big heads per KV
// group >= its heads per group, big head size a multiple of its head size.
#pragma once

#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/quant_rules.h"
#include "model/quantize.h"

namespace tern {

struct EmbedOptions {
  std::string small_path;  // the model to embed
  std::string out_path;
  std::string name;  // general.name; default "embed-<small name>-<dim>x<layers>"
  int n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;  // the big shape (n_head_kv 0 = n_head)
  QuantScheme scheme{};
};

Result<QuantizeReport> synth_embed_model(const EmbedOptions& options, ThreadPool& pool,
                                         const QuantizeProgressFn& progress = {});

}  // namespace tern
