// The per-machine tuning record (kernels/tuning.h): its text form both ways,
// clear errors for what does not parse, and the driver reading its entries
// without any change to results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ref/ops.h"
#include "kernels/tuning.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

using gguf::GgmlType;

TEST(Tuning, RecordRoundTripsThroughItsText) {
  TuningRecord r;
  r.cpu = "Some CPU @ 3.0GHz | AVX2 FMA F16C";
  r.set(CpuLevel::Avx2, GgmlType::Q4_0, size_t{1} << 20);
  r.set(CpuLevel::Avx512, GgmlType::Q6_K, size_t{256} << 10);
  r.set(CpuLevel::Avx2, GgmlType::Q4_0, size_t{2} << 20);  // replaces, not appends
  ASSERT_EQ(r.act_blocks.size(), 2u);
  auto back = parse_tuning(format_tuning(r));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->cpu, r.cpu);
  ASSERT_EQ(back->act_blocks.size(), 2u);
  ASSERT_NE(back->find(CpuLevel::Avx2, GgmlType::Q4_0), nullptr);
  EXPECT_EQ(back->find(CpuLevel::Avx2, GgmlType::Q4_0)->bytes, size_t{2} << 20);
  EXPECT_EQ(back->find(CpuLevel::Avx512, GgmlType::Q6_K)->bytes, size_t{256} << 10);
  EXPECT_EQ(back->find(CpuLevel::Avx2, GgmlType::Q6_K), nullptr);
  back->erase(CpuLevel::Avx2, GgmlType::Q4_0);
  EXPECT_EQ(back->find(CpuLevel::Avx2, GgmlType::Q4_0), nullptr);
  EXPECT_EQ(back->act_blocks.size(), 1u);
  // Comments, blank lines and spacing are not facts.
  auto spaced = parse_tuning("# note\n\n  cpu  X | AVX2  \nact_block_bytes  avx2 F16   65536  # why\n");
  ASSERT_TRUE(spaced) << spaced.status().message();
  EXPECT_EQ(spaced->cpu, "X | AVX2");
  EXPECT_EQ(spaced->find(CpuLevel::Avx2, GgmlType::F16)->bytes, 65536u);
}

TEST(Tuning, MalformedRecordsNameTheLine) {
  const struct {
    const char* text;
    const char* says;
  } bad[] = {
      {"cpu X\nact_block_bytes avx9 Q4_0 65536\n", "line 2: unknown kernel level 'avx9'"},
      {"cpu X\nact_block_bytes avx2 Q4_9 65536\n", "line 2: unknown weight type 'Q4_9'"},
      {"cpu X\nact_block_bytes avx2 Q4_0 100\n", "line 2: act_block_bytes '100' is not a size"},
      {"cpu X\nact_block_bytes avx2 Q4_0 2000000000000\n", "is not a size"},
      {"cpu X\nact_block_bytes avx2 Q4_0 -65536\n", "is not a size"},
      {"cpu X\nact_block_bytes avx2 Q4_0 64k\n", "is not a size"},
      {"cpu X\nact_block_bytes avx2 Q4_0\n", "line 2: expected 'act_block_bytes LEVEL TYPE BYTES'"},
      {"cpu X\nact_block_bytes avx2 Q4_0 65536 more\n", "line 2: expected"},
      {"cpu X\n\nprefetch 4\n", "line 3: unknown entry 'prefetch'"},
      {"cpu\n", "line 1: cpu names no machine"},
      {"act_block_bytes avx2 Q4_0 65536\n", "no 'cpu' line"},
      {"", "no 'cpu' line"},
  };
  for (const auto& b : bad) {
    auto r = parse_tuning(b.text);
    ASSERT_FALSE(r) << b.text;
    EXPECT_EQ(r.status().kind(), ErrorKind::InvalidFile) << b.text;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
  }
}

TEST(Tuning, IdentityIsOneLineTheParserKeeps) {
  const std::string id = cpu_identity();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id.find('\n'), std::string::npos);
  EXPECT_NE(id.find(cpu_features().describe()), std::string::npos);
  TuningRecord r;
  r.cpu = id;
  auto back = parse_tuning(format_tuning(r));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->cpu, id);
}

// The driver takes a type's block from the record in use, and blocking only
// orders the work: with a 4 KiB block (one or two activation rows per pass)
// every output is bit-identical to the default's.
TEST(Tuning, DriverReadsTheRecordAndItsBlockNeverChangesResults) {
  const ActiveTuning saved = active_tuning();
  const CpuLevel level = best_cpu_level();
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::F16}) {
    const quant::TypeTraits* tr = quant::traits(t);
    const MatmulKernels* k = matmul_kernels(t);
    ASSERT_NE(k, nullptr);
    const testing::Problem p = testing::make_problem(t, 512, 70, 150, 7);
    WeightView view{tr, p.w.data(), p.n_rows, p.n, p.w_stride};
    ThreadPool pool(2);
    TuningRecord none;
    none.cpu = cpu_identity();
    set_active_tuning(none, "");
    EXPECT_EQ(tuned_act_block_bytes(level, t, k->act_block_bytes), k->act_block_bytes);
    std::vector<float> want(150 * p.n_rows), got(want.size());
    matmul(view, p.x.data(), want.data(), 150, pool);
    TuningRecord tiny = none;
    tiny.set(level, t, kMinActBlockBytes);
    set_active_tuning(tiny, "test");
    EXPECT_EQ(tuned_act_block_bytes(level, t, k->act_block_bytes), kMinActBlockBytes);
    EXPECT_EQ(tuned_act_block_bytes(level, GgmlType::Q8_0, 12345), 12345u);  // other types keep theirs
    matmul(view, p.x.data(), got.data(), 150, pool);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << tr->name;
  }
  set_active_tuning(saved.record, saved.source);
}

}  // namespace
}  // namespace tern::kernels
