#include "arch_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model/batch_runner.h"

namespace tern::test {

using gguf::GgmlType;

Loaded load(const SyntheticModel& sm, GgmlType type) {
  Loaded out;
  auto file = to_gguf(sm, type);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file) return out;
  std::string why;
  EXPECT_TRUE(out.ref.load(*file, &why)) << why;
  auto m = Model::from_gguf(std::move(file).value());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (m) out.model = std::move(m).value();
  return out;
}

ReferenceGguf reference_of(const SyntheticModel& sm) {
  ReferenceGguf ref;
  auto file = to_gguf(sm);
  std::string why = file ? "" : file.status().message();
  EXPECT_TRUE(file && ref.load(*file, &why)) << why;
  return ref;
}

std::vector<int> random_tokens(size_t n, int n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, n_vocab - 1);
  std::vector<int> t(n);
  for (int& x : t) x = d(rng);
  return t;
}

Rows run(const Model& m, const std::vector<int>& tokens, std::vector<size_t> first, size_t then, int block_size) {
  auto runner = BatchRunner::create(m, 1, static_cast<int32_t>(tokens.size()), KvType::F32, block_size);
  EXPECT_TRUE(runner.is_ok());
  BatchRunner& kv = *runner.value();
  const int nv = m.hparams().n_vocab;
  Rows rows;
  std::vector<float> logits;
  size_t i = 0;
  for (size_t c = 0; i < tokens.size(); ++c) {
    const size_t len = std::min(tokens.size() - i, c < first.size() ? first[c] : then);
    Batch b;
    for (size_t j = i; j < i + len; ++j) b.add(tokens[j], static_cast<int32_t>(j), SeqId(0), true);
    auto s = kv.forward(b, logits);
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s) return rows;
    for (size_t r = 0; r < len; ++r) rows.emplace_back(logits.begin() + r * nv, logits.begin() + (r + 1) * nv);
    i += len;
  }
  return rows;
}

namespace {

template <typename A, typename B>
double max_diff_of(const A& got, const B& want, size_t from) {
  EXPECT_EQ(got.size(), want.size());
  double d = 0.0;
  for (size_t t = from; t < std::min(got.size(), want.size()); ++t)
    for (size_t v = 0; v < got[t].size(); ++v) d = std::max(d, std::fabs(double(got[t][v]) - double(want[t][v])));
  return d;
}

}  // namespace

double max_diff(const Rows& got, const RefRows& want, size_t from) { return max_diff_of(got, want, from); }
double max_diff(const Rows& got, const Rows& want, size_t from) { return max_diff_of(got, want, from); }

Rows expect_matches(const Model& m, const ReferenceGguf& ref, const std::vector<int>& tokens, double tol) {
  const RefRows want = ref.forward_all(tokens);
  const Rows all = run(m, tokens, {}, tokens.size());
  EXPECT_LT(max_diff(all, want), tol) << "one batch";
  EXPECT_LT(max_diff(run(m, tokens, {5, 1}, tokens.size()), want), tol) << "5 + 1 + rest";
  EXPECT_LT(max_diff(run(m, tokens, {}, 1), want), tol) << "one token per step";
  return all;
}

void expect_sensitive(const Rows& got, const ReferenceGguf& without, const std::vector<int>& tokens,
                      const char* what) {
  EXPECT_GT(max_diff(got, without.forward_all(tokens)), kSensitive)
      << what << " does not change the logits: the test could not catch it being ignored";
}

Status load_status(const SyntheticModel& sm) {
  auto file = to_gguf(sm);
  if (!file) return file.status();
  auto m = Model::from_gguf(std::move(file).value());
  return m ? Status::ok() : m.status();
}

void expect_error(const SyntheticModel& sm, ErrorKind kind, const std::vector<std::string>& mentions) {
  const Status s = load_status(sm);
  ASSERT_FALSE(s.is_ok()) << "loaded a bad file";
  EXPECT_EQ(s.kind(), kind) << s.message();
  for (const auto& m : mentions) EXPECT_NE(s.message().find(m), std::string::npos) << s.message() << " lacks " << m;
}

}  // namespace tern::test
