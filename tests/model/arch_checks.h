// Checks shared by the synthetic-architecture tests (test_archs.cpp,
// test_arch_layers.cpp): load a SyntheticModel into the engine and into the
// independent double-precision ReferenceGguf, run it through BatchRunner in
// several chunkings, and compare logits.
//
// Tolerances. Logits of these models are O(1) (|logit| < ~5). The engine
// accumulates in f32 (dot products of <= 128 terms of O(1) values, 2 layers,
// softmax over <= 80 positions), so its logits sit 3e-6..1e-5 from the
// double reference (measured); kTol = 2e-4 leaves >20x margin. Every variant
// also shows that the reference *without* the feature (full attention, base
// 1e4, Normal pairing, no scaling …) is > kSensitive = 0.5 away from the
// engine (measured 2..6), 2500x the tolerance, so a feature the engine
// silently ignored, or got subtly wrong, fails.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "reference_gguf.h"
#include "synthetic_model.h"

namespace tern::test {

constexpr double kTol = 2e-4;
constexpr double kSensitive = 0.5;

using Rows = std::vector<std::vector<float>>;      // [n_tokens][n_vocab]
using RefRows = std::vector<std::vector<double>>;  // [n_tokens][n_vocab]

struct Loaded {
  std::unique_ptr<Model> model;
  ReferenceGguf ref;
};

// Loads `sm` (matrices as `type`) into the engine and into the reference.
Loaded load(const SyntheticModel& sm, gguf::GgmlType type = gguf::GgmlType::F32);
// The reference over `sm` encoded as f32 (a variant of a loaded model's file).
ReferenceGguf reference_of(const SyntheticModel& sm);
std::vector<int> random_tokens(size_t n, int n_vocab, uint32_t seed);

// Logits of every position of `tokens` as sequence 0, fed as chunks of the
// sizes in `first`, then chunks of `then` tokens until the end; KV in blocks
// of block_size positions (0: one block for the sequence).
Rows run(const Model& m, const std::vector<int>& tokens, std::vector<size_t> first, size_t then, int block_size = 0);

// Largest |got - want| over positions [from, end) and the whole vocabulary.
double max_diff(const Rows& got, const RefRows& want, size_t from = 0);
double max_diff(const Rows& got, const Rows& want, size_t from = 0);

// The engine's logits for `tokens` — fed at once, as 5 + 1 + rest and one at
// a time — match `ref` within `tol`. Returns the all-at-once logits.
Rows expect_matches(const Model& m, const ReferenceGguf& ref, const std::vector<int>& tokens, double tol = kTol);

// The engine differs from a reference that lacks the feature under test.
void expect_sensitive(const Rows& got, const ReferenceGguf& without, const std::vector<int>& tokens, const char* what);

// Loading `sm`: ok, or the Status; expect_error checks kind and that the message names each of `mentions`.
Status load_status(const SyntheticModel& sm);
void expect_error(const SyntheticModel& sm, ErrorKind kind, const std::vector<std::string>& mentions);

}  // namespace tern::test
