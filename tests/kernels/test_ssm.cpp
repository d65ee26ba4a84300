// The state-space kernels (kernels/ssm.h) at every CPU level against the
// double-precision references (kernels/ref/ssm_reference.h), and the
// properties the engine relies on: a channel's result does not depend on how
// channels are split or on how a sequence's tokens are cut into runs (one run
// of n tokens leaves the state n runs of one token leave, bit for bit), and
// a snapshot taken inside a run is the state a run ending there leaves.
//
// Budget: the polynomial e^x (~1e-7) and float state over 24 steps;
// measured <= 1.9e-7 relative (recorded as ssm_<level>_*); kRel = 2e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul_test_util.h"
#include "kernels/ref/ssm_reference.h"
#include "kernels/ssm.h"

namespace tern::kernels {
namespace {

constexpr double kRel = 2e-6;

std::vector<float> random_values(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Inputs of a layer of d_inner channels over n tokens, the state carried in.
struct Case {
  SsmDims dims;
  int64_t n;
  std::vector<float> x, w, bias, conv_state;  // conv
  std::vector<float> dt, a, bc, d, z, state;  // scan (x: the conv's output)

  Case(SsmDims dm, int64_t n_tokens, uint32_t seed) : dims(dm), n(n_tokens) {
    const size_t di = static_cast<size_t>(dm.d_inner), ds = static_cast<size_t>(dm.d_state);
    const size_t nt = static_cast<size_t>(n_tokens);
    x = random_values(nt * 2 * di, -2.0f, 2.0f, seed);  // rows of [x, z] as the input projection writes them
    w = random_values(static_cast<size_t>(dm.d_conv) * di, -0.5f, 0.5f, seed + 1);
    bias = random_values(di, -0.5f, 0.5f, seed + 2);
    conv_state = random_values(static_cast<size_t>(dm.d_conv - 1) * di, -1.0f, 1.0f, seed + 3);
    dt = random_values(nt * di, -7.0f, 22.0f, seed + 4);  // softplus's log1p branch and its linear one (> 20)
    a = random_values(di * ds, -16.0f, -0.5f, seed + 5);
    bc = random_values(nt * 2 * ds, -1.0f, 1.0f, seed + 6);
    d = random_values(di, 0.5f, 1.5f, seed + 7);
    z = random_values(nt * di, -4.0f, 4.0f, seed + 8);
    state = random_values(di * ds, -1.0f, 1.0f, seed + 9);
  }

  SsmConvArgs conv(float* st, float* out, int64_t t0, int64_t n_tokens) const {
    return {dims,
            n_tokens,
            st,
            x.data() + t0 * 2 * dims.d_inner,
            2 * int64_t{dims.d_inner},
            w.data(),
            bias.data(),
            out + t0 * dims.d_inner};
  }
  SsmScanArgs scan(float* st, const float* xin, float* y, int64_t t0, int64_t n_tokens) const {
    const int64_t di = dims.d_inner, ds = dims.d_state;
    SsmScanArgs s;
    s.dims = dims;
    s.n_tokens = n_tokens;
    s.state = st;
    s.x = xin + t0 * di;
    s.x_stride = di;
    s.dt = dt.data() + t0 * di;
    s.dt_stride = di;
    s.a = a.data();
    s.b = bc.data() + t0 * 2 * ds;
    s.c = bc.data() + t0 * 2 * ds + ds;
    s.bc_stride = 2 * ds;
    s.d = d.data();
    s.z = z.data() + t0 * di;
    s.z_stride = di;
    s.y = y + t0 * di;
    return s;
  }
};

double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

void record(const std::string& name, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", value);
  ::testing::Test::RecordProperty(name, buf);
}

TEST(SsmKernels, EveryLevelMatchesTheReference) {
  // d_state 16 (one vector), 20 (a partial second), 1; d_inner not a multiple of 16.
  for (const SsmDims dims : {SsmDims{64, 4, 16}, SsmDims{40, 4, 20}, SsmDims{19, 2, 1}, SsmDims{32, 1, 16}}) {
    const Case c(dims, 24, 7);
    const size_t di = static_cast<size_t>(dims.d_inner), nt = static_cast<size_t>(c.n);
    // Reference: conv, then the scan over the conv's output.
    std::vector<float> ref_cs = c.conv_state, ref_u(nt * di), ref_st = c.state, ref_y(nt * di);
    ssm_conv_reference(c.conv(ref_cs.data(), ref_u.data(), 0, c.n));
    ssm_scan_reference(c.scan(ref_st.data(), ref_u.data(), ref_y.data(), 0, c.n));
    for (CpuLevel level : testing::available_levels()) {
      const std::string name = "ssm_" + std::string(cpu_level_name(level)) + "_" +
                               std::to_string(dims.d_inner) + "x" + std::to_string(dims.d_state);
      SCOPED_TRACE(name);
      const SsmKernels& k = *ssm_kernels_at(level);
      std::vector<float> cs = c.conv_state, u(nt * di), st = c.state, y(nt * di);
      k.conv(c.conv(cs.data(), u.data(), 0, c.n), 0, dims.d_inner);
      // The scan reads the reference's conv output: each kernel is checked on its own.
      k.scan(c.scan(st.data(), ref_u.data(), y.data(), 0, c.n), 0, dims.d_inner);
      const double e_conv = max_rel(u, ref_u);
      const double e_y = max_rel(y, ref_y), e_state = max_rel(st, ref_st);
      record(name + "_conv", e_conv);
      record(name + "_y", e_y);
      EXPECT_LT(e_conv, kRel);
      EXPECT_EQ(cs, ref_cs);  // the kept inputs are copies
      EXPECT_LT(e_y, kRel);
      EXPECT_LT(e_state, kRel);
    }
  }
}

TEST(SsmKernels, ChannelSplitsAndRunCutsAreBitIdentical) {
  const SsmDims dims{80, 4, 16};
  const Case c(dims, 13, 3);
  const size_t di = static_cast<size_t>(dims.d_inner), nt = static_cast<size_t>(c.n);
  for (CpuLevel level : testing::available_levels()) {
    SCOPED_TRACE(cpu_level_name(level));
    const SsmKernels& k = *ssm_kernels_at(level);
    // Whole: one run, all channels at once, with snapshots of the state after 6 and 8 tokens.
    std::vector<float> cs = c.conv_state, u(nt * di), st = c.state, y(nt * di);
    const size_t n_conv = cs.size(), n_ssm = st.size();
    std::vector<float> snap_mem(2 * (n_conv + n_ssm), -1.0f);
    const SsmSnap snaps[] = {{6, snap_mem.data(), snap_mem.data() + n_conv},
                             {8, snap_mem.data() + n_conv + n_ssm, snap_mem.data() + 2 * n_conv + n_ssm}};
    SsmConvArgs ca = c.conv(cs.data(), u.data(), 0, c.n);
    ca.snaps = snaps;
    ca.n_snaps = 2;
    k.conv(ca, 0, dims.d_inner);
    SsmScanArgs sa = c.scan(st.data(), u.data(), y.data(), 0, c.n);
    sa.snaps = snaps;
    sa.n_snaps = 2;
    k.scan(sa, 0, dims.d_inner);
    // Cut: runs of 1, 5, 2 and 5 tokens, channels in chunks of 16 (the CPU backend's split).
    std::vector<float> cs2 = c.conv_state, u2(nt * di), st2 = c.state, y2(nt * di);
    int64_t t0 = 0;
    for (int64_t len : {1, 5, 2, 5}) {
      for (int c0 = 0; c0 < dims.d_inner; c0 += 16)
        k.conv(c.conv(cs2.data(), u2.data(), t0, len), c0, c0 + 16);
      for (int c0 = 0; c0 < dims.d_inner; c0 += 16)
        k.scan(c.scan(st2.data(), u2.data(), y2.data(), t0, len), c0, c0 + 16);
      t0 += len;
      if (t0 == 6 || t0 == 8) {  // the snapshots hold the state a run ending here leaves
        const size_t at = t0 == 6 ? 0 : n_conv + n_ssm;
        EXPECT_EQ(std::vector<float>(snap_mem.begin() + at, snap_mem.begin() + at + n_conv), cs2) << t0;
        EXPECT_EQ(std::vector<float>(snap_mem.begin() + at + n_conv, snap_mem.begin() + at + n_conv + n_ssm), st2) << t0;
      }
    }
    ASSERT_EQ(t0, c.n);
    EXPECT_EQ(u2, u);
    EXPECT_EQ(cs2, cs);
    EXPECT_EQ(y2, y);
    EXPECT_EQ(st2, st);
  }
}

// Mamba-2's scan (head_dim > 0): heads of head_dim channels with one dt, A,
// D and dt bias each, groups of heads sharing B and C, read from rows laid
// out as the mixer has them ([x, B of each group, C of each group] after the
// convolution, dt inside the input projection's rows).
struct Case2 {
  SsmDims dims;
  int head_dim, n_group;
  int64_t n;
  int64_t row;  // floats per xBC row
  std::vector<float> xbc, dt, a, d, dt_bias, z, state;

  Case2(SsmDims dm, int hd, int ng, int64_t n_tokens, uint32_t seed)
      : dims(dm), head_dim(hd), n_group(ng), n(n_tokens) {
    const size_t di = static_cast<size_t>(dm.d_inner), ds = static_cast<size_t>(dm.d_state);
    const size_t nt = static_cast<size_t>(n_tokens), heads = di / static_cast<size_t>(hd);
    row = static_cast<int64_t>(di + 2 * static_cast<size_t>(ng) * ds);
    xbc = random_values(nt * static_cast<size_t>(row), -1.5f, 1.5f, seed);
    dt = random_values(nt * heads, -7.0f, 21.0f, seed + 1);
    dt_bias = random_values(heads, -1.0f, 1.0f, seed + 2);
    a = random_values(heads, -8.0f, -0.5f, seed + 3);
    d = random_values(heads, 0.5f, 1.5f, seed + 4);
    z = random_values(nt * di, -4.0f, 4.0f, seed + 5);
    state = random_values(di * ds, -1.0f, 1.0f, seed + 6);
  }
  SsmScanArgs scan(float* st, float* y, int64_t t0, int64_t n_tokens) const {
    const int64_t di = dims.d_inner, ds = dims.d_state, heads = di / head_dim;
    SsmScanArgs s;
    s.dims = dims;
    s.n_tokens = n_tokens;
    s.state = st;
    s.x = xbc.data() + t0 * row;
    s.x_stride = row;
    s.dt = dt.data() + t0 * heads;
    s.dt_stride = heads;
    s.a = a.data();
    s.b = xbc.data() + t0 * row + di;
    s.c = xbc.data() + t0 * row + di + n_group * ds;
    s.bc_stride = row;
    s.d = d.data();
    s.z = z.data() + t0 * di;
    s.z_stride = di;
    s.head_dim = head_dim;
    s.n_group = n_group;
    s.dt_bias = dt_bias.data();
    s.y = y + t0 * di;
    return s;
  }
};

TEST(SsmKernels, Mamba2EveryLevelMatchesTheReferenceAndCutsAreBitIdentical) {
  // Heads of 24 channels (blocks of 16 then 8), and of 32 (two whole vectors);
  // 1, 2 and 3 groups; d_state 20, 64, 16 and 140 (whole register chunks of
  // every level, then whole vectors, then a partial one).
  struct Shape {
    SsmDims dims;
    int head_dim, n_group;
  };
  for (const Shape sh : {Shape{{96, 4, 20}, 24, 2}, Shape{{64, 4, 64}, 32, 1}, Shape{{48, 4, 16}, 16, 3},
                          Shape{{32, 4, 140}, 16, 1}}) {
    const Case2 c(sh.dims, sh.head_dim, sh.n_group, 14, 5);
    const size_t di = static_cast<size_t>(sh.dims.d_inner), nt = static_cast<size_t>(c.n);
    std::vector<float> ref_st = c.state, ref_y(nt * di);
    ssm_scan_reference(c.scan(ref_st.data(), ref_y.data(), 0, c.n));
    for (CpuLevel level : testing::available_levels()) {
      const std::string name = "ssm2_" + std::string(cpu_level_name(level)) + "_" + std::to_string(sh.dims.d_inner) +
                               "x" + std::to_string(sh.dims.d_state) + "_h" + std::to_string(sh.head_dim);
      SCOPED_TRACE(name);
      const SsmKernels& k = *ssm_kernels_at(level);
      std::vector<float> st = c.state, y(nt * di);
      k.scan(c.scan(st.data(), y.data(), 0, c.n), 0, sh.dims.d_inner);
      const double e_y = max_rel(y, ref_y), e_state = max_rel(st, ref_st);
      record(name + "_y", e_y);
      EXPECT_LT(e_y, kRel);
      EXPECT_LT(e_state, kRel);
      // Runs of 3, 1 and 10 tokens, channels in chunks of 16 (the CPU backend's split).
      std::vector<float> st2 = c.state, y2(nt * di);
      int64_t t0 = 0;
      for (int64_t len : {3, 1, 10}) {
        for (int c0 = 0; c0 < sh.dims.d_inner; c0 += 16)
          k.scan(c.scan(st2.data(), y2.data(), t0, len), c0, std::min(c0 + 16, sh.dims.d_inner));
        t0 += len;
      }
      ASSERT_EQ(t0, c.n);
      EXPECT_EQ(y2, y);
      EXPECT_EQ(st2, st);
    }
  }
}

}  // namespace
}  // namespace tern::kernels
