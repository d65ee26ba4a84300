// Draft models for the speculative-decoding tests, written once per test
// binary next to the converted stories260K: stories260K at Q8_0 (a good
// draft: it agrees with the target on most tokens) and a random-weight
// model with stories260K's vocabulary (a bad one: most proposals rejected),
// plus a random model with another vocabulary (refused).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "../model/model_fixture.h"
#include "model/quantize.h"
#include "model/synth.h"

namespace tern::test {

struct DraftFiles {
  std::string q8, random, other_vocab;
  DraftFiles() {
    if (stories_gguf().empty()) return;
    const std::string dir = std::string(TERN_BINARY_DIR) + "/test_models/";
    const std::string pid = std::to_string(::getpid());
    ThreadPool pool(2);
    QuantizeOptions q{stories_gguf(), dir + "draft_q8." + pid + ".gguf", *find_quant_scheme("Q8_0")};
    if (auto r = quantize_gguf(q, pool); !r) ADD_FAILURE() << r.status().message();
    SynthOptions s;
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 128;
    s.n_ctx = 512;
    s.weight_std = 0.5f;  // peaked, unlike the target: a draft that is often wrong
    s.scheme = *find_quant_scheme("F32");
    s.vocab_path = stories_gguf();
    s.out_path = dir + "draft_random." + pid + ".gguf";
    if (auto r = synth_model(s, pool); !r) ADD_FAILURE() << r.status().message();
    s.vocab_path = std::string(TERN_SHARED_DIR) + "/testdata/tokenizers/ggml-vocab-llama-spm.gguf";
    s.out_path = dir + "draft_other_vocab." + pid + ".gguf";
    if (auto r = synth_model(s, pool); !r) ADD_FAILURE() << r.status().message();
    q8 = q.out_path;
    random = dir + "draft_random." + pid + ".gguf";
    other_vocab = s.out_path;
  }
  ~DraftFiles() {
    for (const std::string& p : {q8, random, other_vocab})
      if (!p.empty()) std::filesystem::remove(p);
  }
};

inline const DraftFiles& draft_files() {
  static const DraftFiles files;
  return files;
}

}  // namespace tern::test
