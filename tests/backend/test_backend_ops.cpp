// Every op of the Backend interface, CPU backend against the reference
// backend, on random inputs.
//
// Where the two backends compute differently (norms, matmuls, RoPE, SwiGLU,
// attention) the CPU result must stay within a named budget of the
// reference; each budget below states what the CPU backend rounds that the
// reference does not, the error measured on these inputs, and the margin.
// Where they share code (embed, store_kv and gather_rows live in
// HostBackend; both add loops do one IEEE addition per element) a CPU-vs-ref
// comparison would prove nothing, so those ops are checked against the
// test's own expectation, exactly. Attention is also checked against the
// test's own double-precision attention over the logical keys and values,
// because the block-table walk (backend/attention_blocks) is shared too.
//
// These tests write inputs straight into the buffers they pass: fine for host
// backends; a device backend would need a host-to-device copy the forward
// pass does not (docs/backend.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/ref/ref_backend.h"
#include "core/fp16.h"
#include "kv/paged_kv_cache.h"
#include "quant/quant.h"

namespace tern::backend {
namespace {

using gguf::GgmlType;

std::vector<float> random_floats(size_t n, uint32_t seed, float std_dev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, std_dev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Measured errors go to the test's XML report (--gtest_output=xml), where the
// budgets below were read from.
void record(const std::string& name, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", value);
  ::testing::Test::RecordProperty(name, buf);
}

class BackendOps : public ::testing::Test {
 protected:
  // Two threads so the CPU backend's pool paths run; packing on, as in use.
  std::unique_ptr<Backend> cpu_ = make_cpu_backend(2, /*pack=*/true);
  std::unique_ptr<Backend> ref_ = make_ref_backend();
};

TEST_F(BackendOps, KindsAndNames) {
  EXPECT_EQ(cpu_->kind(), BackendKind::Cpu);
  EXPECT_EQ(ref_->kind(), BackendKind::Ref);
  EXPECT_EQ(ref_->n_threads(), 1);
  EXPECT_EQ(cpu_->n_threads(), 2);
  EXPECT_EQ(*parse_backend_kind("ref"), BackendKind::Ref);
  EXPECT_STREQ(backend_kind_name(*parse_backend_kind("cpu")), "cpu");
  const auto bad = parse_backend_kind("cuda");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::InvalidArgument);
  for (const char* name : {"'cuda'", "cpu", "ref"}) EXPECT_NE(bad.status().message().find(name), std::string::npos);
}

// ---- rms_norm ----------------------------------------------------------------
// The CPU sums squares in f32 (n additions, relative error <= n 2^-24 in the
// worst case, ~sqrt(n) 2^-24 typically) and scales in f32; the reference sums
// in double. Per element the error is relative to |y|: measured max 5.0e-7
// (n <= 1000, values spanning 1e-3..1e3); kRmsNormRel = 4e-6 is 8x that and
// still 250x below what a wrong mean (n vs n-1, say: 1e-3) would give.
constexpr double kRmsNormRel = 4e-6;

TEST_F(BackendOps, RmsNorm) {
  for (int64_t n : {8, 64, 1000}) {
    for (float magnitude : {1e-3f, 1.0f, 1e3f}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " magnitude " << magnitude);
      const int64_t rows = 3;
      const auto x = random_floats(static_cast<size_t>(rows * n), static_cast<uint32_t>(n), magnitude);
      auto w = random_floats(static_cast<size_t>(n), 7, 0.1f);
      for (float& v : w) v += 1.0f;
      std::vector<float> y_cpu(x.size()), y_ref(x.size());
      cpu_->rms_norm(x.data(), w.data(), y_cpu.data(), rows, n, 1e-5f);
      ref_->rms_norm(x.data(), w.data(), y_ref.data(), rows, n, 1e-5f);
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i)
        worst = std::max(worst, std::fabs(y_cpu[i] - y_ref[i]) / std::max(1e-30, std::fabs(double(y_ref[i]))));
      EXPECT_LT(worst, kRmsNormRel);
      record("rms_norm_" + std::to_string(n) + "_" + std::to_string(magnitude), worst);
      // In place (the output head normalises its gathered rows in place).
      std::vector<float> in_place = x;
      ref_->rms_norm(in_place.data(), w.data(), in_place.data(), rows, n, 1e-5f);
      EXPECT_EQ(in_place, y_ref);
      // Independently: row 0 of y / w has mean square ms(x) / (ms(x) + eps).
      double ms_x = 0, ms_y = 0;
      for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
        ms_x += double(x[i]) * x[i];
        ms_y += std::pow(double(y_ref[i]) / w[i], 2);
      }
      ms_x /= static_cast<double>(n);
      EXPECT_NEAR(ms_y / static_cast<double>(n), ms_x / (ms_x + 1e-5), 1e-6);
    }
  }
}

// ---- matmul and matmul_group ----------------------------------------------------
// A weight matrix of random N(0, 1) values encoded as `type`, viewed in place.
struct Matrix {
  std::vector<uint8_t> bytes;  // [n_rows][row bytes]
  kernels::WeightView view;
  std::vector<float> decoded;  // [n_rows][n_cols] what the encoded weights are
};

Matrix random_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  Matrix m;
  const quant::TypeTraits* t = quant::traits(type);
  const size_t row = quant::row_bytes(*t, n_cols);
  const auto w = random_floats(static_cast<size_t>(n_rows * n_cols), seed);
  m.bytes.resize(row * static_cast<size_t>(n_rows));
  m.decoded.resize(w.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    t->from_float(w.data() + r * n_cols, m.bytes.data() + r * row, n_cols);
    t->to_float(m.bytes.data() + r * row, m.decoded.data() + r * n_cols, n_cols);
  }
  m.view = {t, m.bytes.data(), n_rows, n_cols, row, nullptr};
  return m;
}

// Largest |cpu - ref| over all outputs, each relative to sum_j |w_j x_j| of
// its own dot product (the size its rounding errors scale with).
double matmul_error(const Matrix& m, const std::vector<float>& x, const std::vector<float>& y_cpu,
                    const std::vector<float>& y_ref, int64_t n_tokens) {
  const int64_t rows = m.view.n_rows, n = m.view.n_cols;
  double worst = 0;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0;
      for (int64_t j = 0; j < n; ++j) mag += std::fabs(double(m.decoded[static_cast<size_t>(r * n + j)]) * x[static_cast<size_t>(t * n + j)]);
      const size_t o = static_cast<size_t>(t * rows + r);
      worst = std::max(worst, std::fabs(double(y_cpu[o]) - y_ref[o]) / mag);
    }
  return worst;
}

// Budgets for matmul_error. Both backends use the same encoded weights; the
// CPU kernels differ from the double reference by how they round the
// activations (quant.h's vec_dot_type) and by f32 accumulation:
//  - F32, F16 weights: f32 activations, only f32 sums: measured 1.9e-7;
//    budget 2e-6 (the worst case n 2^-24 for n = 512 is 3e-5).
//  - BF16: activations rounded to bf16 (at most 2^-9 relative each, so at
//    most 2^-9 = 2.0e-3 of sum |w x| whatever the signs): measured 3.7e-4;
//    budget 2.5e-3, the worst case plus f32 sums.
//  - Q8_0 / Q4_0 / IQ4_NL weights take Q8_0 activations, K-quants Q8_K: each
//    activation off by up to half a step of amax/127 per 32 (256) values;
//    relative to sum |w x| that measured up to 2.1e-3; budget 8e-3. The worst
//    case (0.57 amax / 127 / mean|x| ~ 1.6e-2 for normal x) needs every
//    rounding to line up with the weights' signs.
// A wrong kernel (a block decoded with the wrong scale, a row missing) is
// O(1) off on this scale.
double matmul_budget(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16: return 2e-6;
    case GgmlType::BF16: return 2.5e-3;
    default: return 8e-3;
  }
}

const GgmlType kMatmulTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                 GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS,
                                 GgmlType::MXFP4};

TEST_F(BackendOps, MatmulEveryWeightType) {
  // 72 rows: two whole 32-row panels and a partial one; 512 columns: two
  // K-quant super-blocks. 1 token (decode), 3 and 17 (kernel column tails).
  constexpr int64_t kRows = 72, kCols = 512;
  for (GgmlType type : kMatmulTypes) {
    SCOPED_TRACE(gguf::type_name(type));
    Matrix m = random_matrix(type, kRows, kCols, 11);
    // The CPU backend's load step gives the pages of the bytes it packed back
    // to the kernel (they are file pages in a model): it gets its own copy.
    Matrix m_cpu = random_matrix(type, kRows, kCols, 11);
    kernels::WeightView packed = m_cpu.view;
    cpu_->prepare_matrix(packed);
    ref_->prepare_matrix(m.view);
    EXPECT_EQ(m.view.packed, nullptr) << "the reference prepares nothing";
    for (int64_t n_tokens : {1, 3, 17}) {
      SCOPED_TRACE(n_tokens);
      const auto x = random_floats(static_cast<size_t>(n_tokens * kCols), static_cast<uint32_t>(n_tokens));
      std::vector<float> y_cpu(static_cast<size_t>(n_tokens * kRows)), y_ref(y_cpu.size());
      cpu_->matmul(packed, x.data(), y_cpu.data(), n_tokens);
      ref_->matmul(m.view, x.data(), y_ref.data(), n_tokens);
      const double err = matmul_error(m, x, y_cpu, y_ref, n_tokens);
      EXPECT_LT(err, matmul_budget(type));
      record("matmul_" + std::string(gguf::type_name(type)) + "_" + std::to_string(n_tokens), err);
      // The reference is the plain sum over decoded weights (a double dot here).
      for (int64_t r : {int64_t{0}, kRows - 1}) {
        double dot = 0;
        for (int64_t j = 0; j < kCols; ++j) dot += double(m.decoded[static_cast<size_t>(r * kCols + j)]) * x[static_cast<size_t>(j)];
        EXPECT_NEAR(y_ref[static_cast<size_t>(r)], dot, 1e-5 * std::max(1.0, std::fabs(dot)));
      }
    }
  }
  EXPECT_EQ(ref_->prepared_bytes(), 0u);
}

// Packing drops the source pages only when they map a file (re-read on
// touch); ordinary memory would read back as zeros, so it stays untouched.
TEST_F(BackendOps, PackingLeavesWeightsInOrdinaryMemoryIntact) {
  Matrix m = random_matrix(GgmlType::Q4_0, 64, 256, 5);
  const size_t n_bytes = static_cast<size_t>(m.view.n_rows) * m.view.row_stride_bytes;
  const std::vector<uint8_t> before(static_cast<const uint8_t*>(m.view.data),
                                    static_cast<const uint8_t*>(m.view.data) + n_bytes);
  ASSERT_FALSE(m.view.file_backed);
  kernels::WeightView w = m.view;
  cpu_->prepare_matrix(w);
  EXPECT_EQ(0, std::memcmp(before.data(), m.view.data, n_bytes)) << "packing zeroed weights it did not own";
}

// Q/K/V and gate/up run as one group: each output as matmul gives it, also
// when the group mixes types (a Q4_K_M file has Q4_K and Q6_K side by side).
TEST_F(BackendOps, MatmulGroupMixedTypes) {
  constexpr int64_t kCols = 256, kTokens = 5;
  Matrix a = random_matrix(GgmlType::Q4_K, 64, kCols, 1);
  Matrix b = random_matrix(GgmlType::Q6_K, 40, kCols, 2);
  Matrix c = random_matrix(GgmlType::Q8_0, 96, kCols, 3);
  Matrix d = random_matrix(GgmlType::F16, 8, kCols, 4);
  Matrix* ms[] = {&a, &b, &c, &d};
  std::vector<Matrix> cpu_copies;  // the CPU's load step releases the pages it packed from (see above)
  std::vector<kernels::WeightView> packed;
  for (Matrix* m : ms) cpu_copies.push_back(*m);
  for (Matrix& m : cpu_copies) {
    m.view.data = m.bytes.data();
    packed.push_back(m.view);
    cpu_->prepare_matrix(packed.back());
  }
  const auto x = random_floats(kTokens * kCols, 5);
  std::vector<std::vector<float>> y_cpu, y_ref, y_single;
  std::vector<MatmulJob> jobs_cpu, jobs_ref;
  for (size_t i = 0; i < 4; ++i) {
    const size_t n = static_cast<size_t>(kTokens * ms[i]->view.n_rows);
    y_cpu.emplace_back(n);
    y_ref.emplace_back(n);
    y_single.emplace_back(n);
  }
  for (size_t i = 0; i < 4; ++i) {
    jobs_cpu.push_back({&packed[i], y_cpu[i].data()});
    jobs_ref.push_back({&ms[i]->view, y_ref[i].data()});
  }
  cpu_->matmul_group(jobs_cpu, x.data(), kTokens);
  ref_->matmul_group(jobs_ref, x.data(), kTokens);
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(gguf::type_name(ms[i]->view.traits->type));
    EXPECT_LT(matmul_error(*ms[i], x, y_cpu[i], y_ref[i], kTokens), matmul_budget(ms[i]->view.traits->type));
    cpu_->matmul(packed[i], x.data(), y_single[i].data(), kTokens);
    EXPECT_EQ(y_cpu[i], y_single[i]) << "the CPU group must give each matrix matmul's bits";
    ref_->matmul(ms[i]->view, x.data(), y_single[i].data(), kTokens);
    EXPECT_EQ(y_ref[i], y_single[i]);
  }
}

// ---- add, add_bias ---------------------------------------------------------------
// One f32 addition per element has one correctly rounded answer: exact.
TEST_F(BackendOps, AddAndAddBiasAreExact) {
  constexpr int64_t kRows = 4, kN = 40;
  const auto x = random_floats(kRows * kN, 1), y = random_floats(kRows * kN, 2), bias = random_floats(kN, 3);
  for (Backend* be : {cpu_.get(), ref_.get()}) {
    SCOPED_TRACE(backend_kind_name(be->kind()));
    std::vector<float> sum = x, biased = x;
    be->add(sum.data(), y.data(), kRows, kN);
    be->add_bias(biased.data(), bias.data(), kRows, kN);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(sum[i], x[i] + y[i]) << i;
      ASSERT_EQ(biased[i], x[i] + bias[i % kN]) << i;
    }
  }
}

// ---- rope ------------------------------------------------------------------------
// The CPU rotates in f32 (angle pos * base^(-2i/n_rot) rounded twice, cosf,
// sinf); the reference computes angles and rotation in double. The angle's
// rounding grows with the position: |dtheta| <~ 2^-23 * theta, theta <= pos.
// Relative to the largest |x| of a row (a rotation keeps each pair's norm),
// the largest error measured was 0.34 of kRopeRelBase + kRopeRelPerPos * pos
// (2e-6 + 1e-7 * pos: 8e-6 at 64, 4.1e-4 at 4095) over positions 0..4095 and
// every case (YaRN's; the others 0.03..0.18), while the wrong pairing or a
// missed scaling moves values by O(1) (asserted: > 100x the budget).
constexpr double kRopeRelBase = 2e-6;
constexpr double kRopeRelPerPos = 1e-7;

struct RopeCase {
  const char* name;
  int n_heads, head_dim;
  kernels::RopeParams p;
};

std::vector<RopeCase> rope_cases() {
  using kernels::RopeLayout;
  kernels::RopeParams normal{RopeLayout::Normal, 16};
  kernels::RopeParams neox{RopeLayout::NeoX, 16, 1e6f};
  kernels::RopeParams partial{RopeLayout::Normal, 8};
  kernels::RopeParams partial_neox{RopeLayout::NeoX, 8};
  kernels::RopeParams linear{RopeLayout::Normal, 16, 10000.0f, 0.25f};
  // YaRN factor 4 over an original context of 64 (llama.cpp's ext_factor 1).
  kernels::RopeParams yarn{RopeLayout::NeoX, 16, 10000.0f, 0.25f, 64, 1.0f, 1.0f, 32.0f, 1.0f};
  // Per-pair frequency divisors (Llama 3.1 rope_freqs, Phi-3 LongRoPE), with and without YaRN.
  static const float kFactors[8] = {1.0f, 1.0f, 2.0f, 4.0f, 0.5f, 8.0f, 0.1f, 16.0f};
  kernels::RopeParams factors{RopeLayout::Normal, 16, 500000.0f};
  factors.freq_factors = kFactors;
  kernels::RopeParams factors_yarn = yarn;
  factors_yarn.freq_factors = kFactors;
  return {{"normal", 4, 16, normal},          {"neox base 1e6", 2, 16, neox},
          {"partial 8 of 16", 4, 16, partial}, {"partial neox 8 of 16", 2, 16, partial_neox},
          {"linear x4", 3, 16, linear},        {"yarn x4", 2, 16, yarn},
          {"freq factors", 2, 16, factors},    {"freq factors yarn x4", 2, 16, factors_yarn}};
}

const int32_t kRopePositions[] = {0, 1, 5, 63, 64, 200, 511, 4095};

// Largest rope error relative to the row's magnitude and the position's budget (<= 1 passes).
double rope_error(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x,
                  int64_t n) {
  double worst = 0;
  for (size_t t = 0; t < std::size(kRopePositions); ++t) {
    double mag = 0, diff = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t o = t * static_cast<size_t>(n) + static_cast<size_t>(i);
      mag = std::max(mag, std::fabs(double(x[o])));
      diff = std::max(diff, std::fabs(double(got[o]) - want[o]));
    }
    worst = std::max(worst, diff / mag / (kRopeRelBase + kRopeRelPerPos * kRopePositions[t]));
  }
  return worst;
}

TEST_F(BackendOps, RopeLayoutsPartialRotaryAndScaling) {
  const std::vector<int32_t> pos(std::begin(kRopePositions), std::end(kRopePositions));
  const int64_t n_rows = static_cast<int64_t>(pos.size());
  for (const RopeCase& c : rope_cases()) {
    SCOPED_TRACE(c.name);
    const int64_t n = int64_t{c.n_heads} * c.head_dim;
    const auto x = random_floats(static_cast<size_t>(n_rows * n), 3);
    std::vector<float> y_cpu = x, y_ref = x;
    cpu_->rope(y_cpu.data(), n_rows, c.n_heads, c.head_dim, pos, c.p);
    ref_->rope(y_ref.data(), n_rows, c.n_heads, c.head_dim, pos, c.p);
    EXPECT_LT(rope_error(y_cpu, y_ref, x, n), 1.0);
    record(std::string("rope_") + c.name, rope_error(y_cpu, y_ref, x, n));
    for (int64_t t = 0; t < n_rows; ++t)
      for (int h = 0; h < c.n_heads; ++h)
        for (int i = c.p.n_rot; i < c.head_dim; ++i) {
          const size_t o = static_cast<size_t>(t * n + h * c.head_dim + i);
          ASSERT_EQ(y_cpu[o], x[o]) << "dims past n_rot pass through";
          ASSERT_EQ(y_ref[o], x[o]) << "dims past n_rot pass through";
        }
    // Position 0 is the identity unless YaRN scales magnitudes.
    if (c.p.yarn_orig_ctx == 0) {
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y_ref[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 1e-6);
    }
    // The budget can fail: the other pairing, or no scaling, is far outside it.
    kernels::RopeParams other = c.p;
    other.layout = c.p.layout == kernels::RopeLayout::NeoX ? kernels::RopeLayout::Normal : kernels::RopeLayout::NeoX;
    other.freq_scale = 1.0f;
    std::vector<float> y_other = x;
    ref_->rope(y_other.data(), n_rows, c.n_heads, c.head_dim, pos, other);
    EXPECT_GT(rope_error(y_cpu, y_other, x, n), 100.0);
    if (c.p.freq_factors) {  // and so are the factors ignored
      kernels::RopeParams plain = c.p;
      plain.freq_factors = nullptr;
      std::vector<float> y_plain = x;
      ref_->rope(y_plain.data(), n_rows, c.n_heads, c.head_dim, pos, plain);
      EXPECT_GT(rope_error(y_cpu, y_plain, x, n), 100.0);
    }
  }
}

// Hand-checked values: position 1, base 10000, 4 rotated dims, Normal pairs:
// pair 0 turns by 1 rad, pair 1 by 10000^(-1/2) = 0.01 rad.
TEST_F(BackendOps, RopeKnownAngles) {
  std::vector<float> x = {1, 0, 0, 1};
  const std::vector<int32_t> pos = {1};
  ref_->rope(x.data(), 1, 1, 4, pos, {kernels::RopeLayout::Normal, 4});
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-7);
  EXPECT_NEAR(x[2], -std::sin(0.01), 1e-7);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-7);
}

// ---- swiglu ------------------------------------------------------------------------
// The CPU's exp is a polynomial (kernels/elementwise.h: ~1e-7 relative),
// libm's in the reference; silu(g) u then differs by a few f32 roundings.
// Per element, relative to |silu(g) u|: measured 7.9e-7; kSwigluRel = 4e-6.
// Far tails (g = +-100) must not turn into inf or NaN on either side.
constexpr double kSwigluRel = 4e-6;

TEST_F(BackendOps, Swiglu) {
  constexpr int64_t kRows = 3, kN = 100;
  auto gate = random_floats(kRows * kN, 1, 3.0f);
  const auto up = random_floats(kRows * kN, 2);
  const float tails[] = {-100.0f, -30.0f, -1e-3f, 0.0f, 1e-3f, 30.0f, 100.0f};
  std::copy(std::begin(tails), std::end(tails), gate.begin());
  std::vector<float> g_cpu = gate, g_ref = gate;
  cpu_->swiglu(g_cpu.data(), up.data(), kRows, kN);
  ref_->swiglu(g_ref.data(), up.data(), kRows, kN);
  double worst = 0;
  for (size_t i = 0; i < gate.size(); ++i) {
    const double want = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
    ASSERT_TRUE(std::isfinite(g_cpu[i]) && std::isfinite(g_ref[i])) << "g " << gate[i];
    EXPECT_NEAR(g_ref[i], want, 2e-7 * std::fabs(want) + 1e-30) << "g " << gate[i];
    worst = std::max(worst, std::fabs(double(g_cpu[i]) - g_ref[i]) / std::max(1e-30, std::fabs(want)));
  }
  EXPECT_LT(worst, kSwigluRel);
  record("swiglu", worst);
}

// Gemma's element-wise ops: both backends against the textbook formulas in
// double (budgets: tests/kernels/test_geglu.cpp; here ordinary values only).
TEST_F(BackendOps, GegluSoftcapScale) {
  constexpr int64_t kRows = 3, kN = 100;
  const auto gate = random_floats(kRows * kN, 3, 2.0f);
  const auto up = random_floats(kRows * kN, 4);
  std::vector<float> g_cpu = gate, g_ref = gate;
  cpu_->geglu(g_cpu.data(), up.data(), kRows, kN);
  ref_->geglu(g_ref.data(), up.data(), kRows, kN);
  auto x_cpu = random_floats(kRows * kN, 5, 40.0f), x_ref = x_cpu;
  const std::vector<float> x = x_cpu;
  cpu_->softcap(x_cpu.data(), kRows, kN, 30.0f);
  ref_->softcap(x_ref.data(), kRows, kN, 30.0f);
  std::vector<float> s_cpu = x, s_ref = x;
  cpu_->scale(s_cpu.data(), kRows, kN, 8.0f);
  ref_->scale(s_ref.data(), kRows, kN, 8.0f);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    // (+1e-9: the textbook form cancels in 1 + tanh for g < -5, where results are < 1e-8)
    EXPECT_NEAR(g_cpu[i], want, 2e-6 * std::fabs(want) + 1e-9) << "g " << g;
    EXPECT_NEAR(g_ref[i], want, 2e-7 * std::fabs(want) + 1e-9) << "g " << g;
    const double capped = 30.0 * std::tanh(double(x[i]) / 30.0);
    EXPECT_NEAR(x_cpu[i], capped, 1e-6 * std::fabs(capped) + 1e-30) << "x " << x[i];
    EXPECT_NEAR(x_ref[i], capped, 2e-7 * std::fabs(capped) + 1e-30) << "x " << x[i];
    EXPECT_EQ(s_cpu[i], x[i] * 8.0f);
    EXPECT_EQ(s_ref[i], x[i] * 8.0f);
  }
}

// ---- KV pools: store_kv and attention ----------------------------------------------
// A KV pool as the engine makes one (zero-filled), read back below by the
// test's own arithmetic rather than KvPoolView::row.
struct TestPool {
  PagedKvCache cache;
  KvPoolView view;
  TestPool(KvType type, int n_blocks, int n_layer, int block_size, int n_kv_head, int head_dim)
      : cache(KvShape{n_layer, n_kv_head, head_dim, type}, n_blocks, block_size, /*prefix_caching=*/false),
        view(cache.view()) {}
  std::span<const std::byte> bytes() const { return {view.base, view.block_bytes * static_cast<size_t>(view.n_blocks)}; }
  // Element i of the K (kv 0) or V (kv 1) row of `slot` in `layer`, read by
  // the test's own arithmetic from the diagram [block][layer][K|V][block_size][row]
  // and the row formats of core/kv_format.h.
  float at(int64_t slot, int layer, int kv, int i) const {
    const int64_t block = slot / view.block_size, offset = slot % view.block_size;
    const size_t row_index = ((static_cast<size_t>(block) * view.n_layer + layer) * 2 + kv) * view.block_size + offset;
    const std::byte* row = view.base + row_index * view.row_bytes;
    if (view.type == KvType::F32) {
      float f;
      std::memcpy(&f, row + 4 * static_cast<size_t>(i), sizeof f);
      return f;
    }
    if (view.type == KvType::Fp8) {  // E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits
      const auto c = static_cast<uint8_t>(row[static_cast<size_t>(i)]);
      const int e = (c >> 3) & 15, m = c & 7;
      const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
      return c & 0x80 ? -mag : mag;
    }
    uint16_t h;
    if (view.type == KvType::F16) {
      std::memcpy(&h, row + 2 * static_cast<size_t>(i), sizeof h);
      return fp16_to_float(h);
    }
    // q8_0: per head, [one half scale per group of g (32, or the head size)][head size int8 codes].
    const int hd = view.head_dim, head = i / hd, e = i % hd, g = hd % 32 == 0 ? 32 : hd, n_groups = hd / g;
    if (view.type == KvType::Q4_0) {
      // q4_0: [half scales][per group, g/2 bytes: element k in the low nibble, k + g/2 in the high one, as q + 8].
      const std::byte* slice = row + static_cast<size_t>(head) * (2 * n_groups + hd / 2);
      std::memcpy(&h, slice + 2 * (e / g), sizeof h);
      const int k = e % g, half = g / 2;
      const auto b = static_cast<uint8_t>(slice[2 * n_groups + (e / g) * half + k % half]);
      return fp16_to_float(h) * static_cast<float>((k < half ? b & 15 : b >> 4) - 8);
    }
    const std::byte* slice = row + static_cast<size_t>(head) * (2 * n_groups + hd);
    std::memcpy(&h, slice + 2 * (e / g), sizeof h);
    return fp16_to_float(h) * static_cast<float>(static_cast<int8_t>(slice[2 * n_groups + e]));
  }
};

// Rows stored to scattered slots of layer 1 read back as written (F32 exactly,
// F16 as the nearest half, fp8 within half an E4M3 ulp, q8_0 and q4_0 within their group's rounding), and
// identical bytes from both backends.
TEST_F(BackendOps, StoreKvEveryType) {
  constexpr int kKvHead = 2, kHeadDim = 8, kRow = kKvHead * kHeadDim;
  const std::vector<int64_t> slots = {37, 0, 5, 16, 63};
  const auto k = random_floats(slots.size() * kRow, 1), v = random_floats(slots.size() * kRow, 2);
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8}) {
    SCOPED_TRACE(kv_type_name(type));
    TestPool a(type, 4, 2, 16, kKvHead, kHeadDim), b(type, 4, 2, 16, kKvHead, kHeadDim);
    cpu_->store_kv(a.view, 1, slots, k.data(), v.data());
    ref_->store_kv(b.view, 1, slots, k.data(), v.data());
    EXPECT_TRUE(std::ranges::equal(a.bytes(), b.bytes()));
    for (size_t t = 0; t < slots.size(); ++t)
      for (int i = 0; i < kRow; ++i)
        for (int kv = 0; kv < 2; ++kv) {
          const float want = (kv == 0 ? k : v)[t * kRow + static_cast<size_t>(i)];
          const float got = a.at(slots[t], 1, kv, i);
          if (type == KvType::F32) {
            ASSERT_EQ(got, want);
          } else if (type == KvType::F16) {
            ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -11)) << "half an ulp of a half";
          } else if (type == KvType::Fp8) {
            // Half an ulp of 3 mantissa bits, or of the subnormals' 2^-9 steps.
            ASSERT_LE(std::fabs(got - want), std::max(std::ldexp(std::fabs(want), -4), std::ldexp(1.0f, -10)))
                << "half an ulp of E4M3";
          } else {
            // One group per head here (head size 8): the step is max|x| / 127, its half scale within 2^-11.
            const float* head = (kv == 0 ? k : v).data() + t * kRow + static_cast<size_t>(i / kHeadDim) * kHeadDim;
            float amax = 0;
            for (int j = 0; j < kHeadDim; ++j) amax = std::max(amax, std::fabs(head[j]));
            // q4_0's step is amax / 8 and its codes stop at +7 on the side opposite the largest
            // element (core/kv_format.h), so an element there may lose up to a whole step.
            const float step = type == KvType::Q4_0 ? amax / 8.0f : 0.5f * amax / 127.0f;
            ASSERT_LE(std::fabs(got - want), step * (1.0f + 0x1p-10f) + 1e-7f) << "within the rounding";
            ASSERT_GT(amax, 0.0f);
          }
          ASSERT_EQ(a.at(slots[t], 0, kv, i), 0.0f) << "layer 0 untouched";
        }
  }
}

// Attention over block tables. Three sequences in a 16-position paged pool
// (blocks handed out in shuffled order), queried as a prefill span, a mid
// chunk, a decode token and a span crossing blocks; GQA (8 query heads on 2
// KV heads); with and without a sliding window, where a sequence's blocks
// wholly outside every query's window are freed (-1 in its table).
//
// Budget. Outputs are convex combinations of value rows; relative to the
// largest |v| the CPU's flash attention (f32 scores and sums, polynomial exp,
// online rescaling) measured 5.0e-7 from the reference's full double softmax;
// kAttentionRel = 2e-5 is 40x that. The test's own double attention over the
// logical keys and values checks the reference (and the shared block-table
// walk) to 1e-6 (measured 3.2e-8: the reference's only rounding is the final
// f32 store).
constexpr double kAttentionRel = 2e-5;

struct AttnSeq {
  int n_positions;      // positions stored
  int32_t q_pos0;       // queries at [q_pos0, q_pos0 + n_q)
  int n_q;
};

// Softmax attention of one query head over positions [lo, qpos] of one
// sequence's logical K/V ([pos][n_kv_head][head_dim]), in double. With a
// q8_0 cache the query is first rounded as core/kv_format.h defines (its
// groups' codes times their scales).
void naive_attention(const float* q_in, const std::vector<float>& k, const std::vector<float>& v, int32_t lo,
                     int32_t qpos, int kv_head, int n_kv_head, int head_dim, double scale, double* out,
                     KvType type = KvType::F32) {
  std::vector<double> q(q_in, q_in + head_dim);
  if (kv_is_int(type)) {
    std::vector<int8_t> codes(static_cast<size_t>(head_dim));
    std::vector<float> d(static_cast<size_t>(head_dim));
    kv_quantize_query(q_in, head_dim, codes.data(), d.data());
    const int g = kv_group_elems(type, head_dim);
    for (int i = 0; i < head_dim; ++i) q[static_cast<size_t>(i)] = double(d[static_cast<size_t>(i / g)]) * codes[static_cast<size_t>(i)];
  }
  std::vector<double> w;
  for (int32_t p = lo; p <= qpos; ++p) {
    double s = 0;
    for (int i = 0; i < head_dim; ++i) s += q[static_cast<size_t>(i)] * k[(static_cast<size_t>(p) * n_kv_head + kv_head) * head_dim + i];
    w.push_back(s * scale);
  }
  const double mx = *std::max_element(w.begin(), w.end());
  double sum = 0;
  for (double& x : w) sum += (x = std::exp(x - mx));
  for (int i = 0; i < head_dim; ++i) {
    double acc = 0;
    for (int32_t p = lo; p <= qpos; ++p)
      acc += w[static_cast<size_t>(p - lo)] * v[(static_cast<size_t>(p) * n_kv_head + kv_head) * head_dim + i];
    out[i] = acc / sum;
  }
}

TEST_F(BackendOps, AttentionOverBlockTables) {
  constexpr int kHead = 8, kKvHead = 2, kHeadDim = 32, kBlock = 16, kLayers = 2, kLayer = 1;
  constexpr int kRow = kKvHead * kHeadDim, kQRow = kHead * kHeadDim;
  const std::vector<AttnSeq> seqs = {{120, 0, 37}, {150, 149, 1}, {100, 70, 30}, {120, 90, 5}};
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0, KvType::Fp8}) {
    for (int window : {0, 24}) {
      SCOPED_TRACE(::testing::Message() << kv_type_name(type) << " window " << window);
      TestPool pool(type, 40, kLayers, kBlock, kKvHead, kHeadDim);
      std::mt19937 rng(static_cast<uint32_t>(window + 1));
      std::vector<int32_t> free_blocks(40);
      std::iota(free_blocks.begin(), free_blocks.end(), 0);
      std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
      std::vector<std::vector<int32_t>> tables;
      std::vector<std::vector<float>> ks, vs;  // logical [pos][n_kv_head][head_dim], exact in the pool's type
      std::vector<QuerySpan> spans;
      int64_t n_tokens = 0;
      for (size_t s = 0; s < seqs.size(); ++s) {
        const AttnSeq& sq = seqs[s];
        ks.push_back(random_floats(static_cast<size_t>(sq.n_positions) * kRow, static_cast<uint32_t>(10 + s)));
        vs.push_back(random_floats(static_cast<size_t>(sq.n_positions) * kRow, static_cast<uint32_t>(20 + s)));
        // The values as stored (the codec's round trip), so the naive attention sees what the pool holds.
        std::vector<std::byte> enc(kv_row_bytes(type, kKvHead, kHeadDim));
        for (auto* kv : {&ks.back(), &vs.back()})
          for (size_t r = 0; r < kv->size(); r += kRow) {
            kv_encode_row(type, kv->data() + r, kKvHead, kHeadDim, enc.data());
            for (int h = 0; h < kKvHead; ++h)
              kv_decode_head(type, enc.data() + h * kv_head_bytes(type, kHeadDim), kHeadDim, kv->data() + r + h * kHeadDim);
          }
        // Blocks before the window of the span's first query are never read: freed.
        const int32_t first_seen = window > 0 ? std::max(0, sq.q_pos0 - window + 1) : 0;
        std::vector<int32_t> table;
        for (int b = 0; b * kBlock < sq.n_positions; ++b) {
          if ((b + 1) * kBlock <= first_seen) {
            table.push_back(-1);
            continue;
          }
          table.push_back(free_blocks.back());
          free_blocks.pop_back();
          std::vector<int64_t> slots;
          for (int p = b * kBlock; p < std::min(sq.n_positions, (b + 1) * kBlock); ++p)
            slots.push_back(int64_t{table.back()} * kBlock + p % kBlock);
          ref_->store_kv(pool.view, kLayer, slots, ks.back().data() + static_cast<size_t>(b) * kBlock * kRow,
                         vs.back().data() + static_cast<size_t>(b) * kBlock * kRow);
        }
        tables.push_back(std::move(table));
        spans.push_back({n_tokens, sq.n_q, sq.q_pos0, static_cast<int32_t>(s)});
        n_tokens += sq.n_q;
      }
      std::vector<std::span<const int32_t>> table_spans(tables.begin(), tables.end());
      auto q = random_floats(static_cast<size_t>(n_tokens) * kQRow, 99, 2.0f);  // scores spread over several units
      const kernels::AttentionShape shape{kHead, kKvHead, kHeadDim, 1.0f / std::sqrt(float(kHeadDim)), window, type};
      const AttentionInput in{pool.view, kLayer, spans, table_spans, {}, {}, {}, {}, nullptr, {}};
      std::vector<float> out_cpu(q.size(), -7.0f), out_ref(q.size(), -7.0f);
      cpu_->attention(shape, in, q.data(), out_cpu.data());
      ref_->attention(shape, in, q.data(), out_ref.data());

      double worst_cpu = 0, worst_ref = 0, worst_no_window = 0;
      std::vector<double> want(kHeadDim), full(kHeadDim);
      for (size_t s = 0; s < seqs.size(); ++s) {
        double v_max = 0;
        for (float x : vs[s]) v_max = std::max(v_max, std::fabs(double(x)));
        for (int t = 0; t < seqs[s].n_q; ++t) {
          const int32_t qpos = seqs[s].q_pos0 + t;
          for (int h = 0; h < kHead; ++h) {
            const size_t o = static_cast<size_t>(spans[s].first_token + t) * kQRow + static_cast<size_t>(h) * kHeadDim;
            const int32_t lo = window > 0 ? std::max(0, qpos - window + 1) : 0;
            naive_attention(q.data() + o, ks[s], vs[s], lo, qpos, h / (kHead / kKvHead), kKvHead, kHeadDim,
                            shape.scale, want.data(), type);
            naive_attention(q.data() + o, ks[s], vs[s], 0, qpos, h / (kHead / kKvHead), kKvHead, kHeadDim,
                            shape.scale, full.data(), type);
            for (int i = 0; i < kHeadDim; ++i) {
              worst_cpu = std::max(worst_cpu, std::fabs(out_cpu[o + i] - double(out_ref[o + i])) / v_max);
              worst_ref = std::max(worst_ref, std::fabs(out_ref[o + i] - want[static_cast<size_t>(i)]) / v_max);
              worst_no_window = std::max(worst_no_window, std::fabs(out_ref[o + i] - full[static_cast<size_t>(i)]) / v_max);
            }
          }
        }
      }
      EXPECT_LT(worst_cpu, kAttentionRel);
      EXPECT_LT(worst_ref, 1e-6);
      record(std::string("attention_") + kv_type_name(type) + "_window_" + std::to_string(window), worst_cpu);
      record(std::string("attention_ref_vs_naive_") + kv_type_name(type) + "_window_" + std::to_string(window), worst_ref);
      // The window changes the answer by far more than the budget (so a backend ignoring it fails).
      if (window > 0) {
        EXPECT_GT(worst_no_window, 1000 * kAttentionRel);
      }
    }
  }
}

// ---- embed, gather_rows: shared host code, checked exactly ---------------------------
TEST_F(BackendOps, EmbedDecodesTableRows) {
  const std::vector<TokenId> tokens = {5, 0, 5, 31};
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(gguf::type_name(type));
    constexpr int64_t kCols = 256;
    Matrix table = random_matrix(type, 32, kCols, 8);
    std::vector<float> x_cpu(tokens.size() * kCols), x_ref(x_cpu.size());
    cpu_->embed(table.view, tokens, x_cpu.data());
    ref_->embed(table.view, tokens, x_ref.data());
    EXPECT_EQ(x_cpu, x_ref);
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int64_t i = 0; i < kCols; ++i)
        ASSERT_EQ(x_ref[t * kCols + static_cast<size_t>(i)], table.decoded[static_cast<size_t>(tokens[t] * kCols + i)]);
  }
}

TEST_F(BackendOps, GatherRowsAndToHost) {
  constexpr int64_t kN = 6;
  const auto x = random_floats(8 * kN, 4);
  const std::vector<int32_t> rows = {3, 0, 3, 7};
  for (Backend* be : {cpu_.get(), ref_.get()}) {
    SCOPED_TRACE(backend_kind_name(be->kind()));
    float* out = be->scratch(Slot::OutRows, static_cast<int64_t>(rows.size()) * kN);
    be->gather_rows(x.data(), rows, out, kN);
    std::vector<float> host(rows.size() * kN);
    be->to_host(out, host.data(), static_cast<int64_t>(host.size()));
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t j = 0; j < kN; ++j) ASSERT_EQ(host[i * kN + static_cast<size_t>(j)], x[static_cast<size_t>(rows[i] * kN + j)]);
    EXPECT_NE(be->scratch(Slot::Logits, 4), be->scratch(Slot::OutRows, 4)) << "slots are separate buffers";
  }
}

}  // namespace
}  // namespace tern::backend
