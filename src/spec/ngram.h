// spec/ngram.h — prompt lookup: propose the continuation of a sequence by
// finding its last few tokens earlier in the sequence (the prompt and the
// output so far) and copying what followed them there. No model, no state:
// it pays where outputs repeat their input (quoting, editing, extraction,
// templated and agentic text) and proposes nothing elsewhere.
#pragma once

#include <span>
#include <vector>

#include "core/ids.h"

namespace tern::spec {

struct NgramConfig {
  int n_max = 3;  // longest suffix tried first
  int n_min = 1;  // shortest suffix worth matching
};

// Up to k tokens that followed the most recent earlier occurrence of the
// last n tokens of `tokens` (n from n_max down to n_min); empty when no
// suffix recurs. O(|tokens| * n_max).
std::vector<TokenId> propose_ngram(std::span<const TokenId> tokens, int k, const NgramConfig& config = {});

// Up to n_paths different continuations (for a token tree): what followed
// each earlier occurrence, most recent and longest suffix first, skipping
// any that repeats one already found. The first is propose_ngram's.
std::vector<std::vector<TokenId>> propose_ngram_paths(std::span<const TokenId> tokens, int k, int n_paths,
                                                      const NgramConfig& config = {});

}  // namespace tern::spec
