// bench_matmul — GEMV (decode) and GEMM (prefill) throughput of kernels::matmul
// per weight type, at the best CPU level (TERN_CPU_LEVEL=avx2|scalar caps it,
// or --level), against this machine's measured limits.
//
//   bench_matmul [--types Q4_0,Q8_0,...] [--threads 1,2] [--level avx2] [--quick] [--gemm2 2048x8192]
//
// GEMV: n_tokens = 1 over weights rotated through >= 256 MiB of copies, so
// every call streams from DRAM as a model's decode step does; reported as GB/s
// of weight bytes. GEMM: n_tokens = 512 on one copy; reported as GOP/s
// (2 x rows x cols x tokens). Both include quantize_act and the driver, i.e.
// exactly what a forward pass pays. Prints one markdown table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/pack.h"
#include "kernels/ref/ops.h"
#include "kernels/roofline.h"
#include "quant/quant.h"

namespace tern::bench {
namespace {

using gguf::GgmlType;

struct Shape {
  int64_t rows, cols;  // weight [rows][cols]
};

struct Options {
  std::vector<std::string> types = {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "F16",  "BF16", "Q4_1",
                                    "Q5_0", "Q5_1", "Q5_K", "Q3_K", "Q2_K", "IQ4_NL", "F32"};
  std::vector<int> threads = {1, 2};
  bool quick = false;
  Shape gemm2 = {8192, 2048};  // the second GEMM column (--gemm2 ROWSxCOLS)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = std::min(s.find(',', b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

const quant::TypeTraits* traits_by_name(const std::string& name) {
  for (GgmlType t : {GgmlType::F8_E4M3, GgmlType::F8_E5M2, GgmlType::Q8_0_S24})
    if (name == quant::traits(t)->name) return quant::traits(t);
  for (int t = 0; t < 64; ++t)
    if (const quant::TypeTraits* tr = quant::traits(static_cast<GgmlType>(t)); tr && name == tr->name) return tr;
  return nullptr;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A [rows][cols] matrix of `tr` built from 64 distinct quantized random rows, repeated.
std::vector<uint8_t> make_weights(const quant::TypeTraits& tr, Shape s, uint32_t seed) {
  const size_t row_bytes = quant::row_bytes(tr, s.cols);
  std::vector<uint8_t> w(row_bytes * s.rows);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(s.cols);
  const int64_t n_distinct = std::min<int64_t>(64, s.rows);
  for (int64_t r = 0; r < n_distinct; ++r) {
    for (auto& v : row) v = normal(rng);
    if (tr.from_float)
      tr.from_float(row.data(), w.data() + r * row_bytes, s.cols);
    else  // a row-scaled type (FP8, I8): its codes; the scale is the driver's, not timed here
      quant::quantize_row_scaled(tr.type, row.data(), s.cols, w.data() + r * row_bytes);
  }
  for (int64_t r = n_distinct; r < s.rows; ++r)
    std::memcpy(w.data() + r * row_bytes, w.data() + (r % n_distinct) * row_bytes, row_bytes);
  return w;
}

// A matrix as the model holds it: packed (kernels/pack.h) when the type's
// kernel reads packed panels, in place otherwise. `storage` owns the bytes.
struct Matrix {
  std::vector<uint8_t> storage;
  kernels::WeightView view;
};

Matrix make_matrix(const quant::TypeTraits& tr, Shape s, const std::vector<uint8_t>& w) {
  Matrix m{w, {&tr, nullptr, s.rows, s.cols, quant::row_bytes(tr, s.cols)}};
  m.view.data = m.storage.data();
  const kernels::MatmulKernels* k = kernels::matmul_kernels(tr.type);
  const size_t bytes = k ? kernels::packed_bytes(*k, m.view) : 0;
  if (bytes == 0) return m;
  std::vector<uint8_t> packed(bytes + 64);
  uint8_t* aligned = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
  kernels::pack_weights(*k, m.view, aligned);
  m.storage = std::move(packed);  // the buffer moves, its address does not
  m.view.data = nullptr;
  m.view.packed = aligned;
  return m;
}

// GB/s of weight bytes for n_tokens = 1, weights rotated through >= 256 MiB.
double bench_gemv(const quant::TypeTraits& tr, Shape s, ThreadPool& pool, double min_s) {
  const std::vector<uint8_t> w0 = make_weights(tr, s, 1);
  const size_t bytes = w0.size();
  const size_t n_copies = std::max<size_t>(2, (size_t{256} << 20) / bytes + 1);
  std::vector<Matrix> copies;
  for (size_t i = 0; i < n_copies; ++i) copies.push_back(make_matrix(tr, s, w0));
  std::vector<float> x(s.cols), y(s.rows);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  auto run = [&](size_t i) {
    kernels::matmul(copies[i % n_copies].view, x.data(), y.data(), 1, pool);
  };
  for (size_t i = 0; i < n_copies; ++i) run(i);  // warm up: page in every copy
  size_t n_calls = 0;
  const double t0 = now_s();
  double t = 0;
  do {
    run(n_calls++);
    t = now_s() - t0;
  } while (t < min_s || n_calls < n_copies);
  return static_cast<double>(bytes) * n_calls / t / 1e9;
}

// GOP/s (2 ops per multiply-add) for n_tokens tokens; best of several runs.
double bench_gemm(const quant::TypeTraits& tr, Shape s, int64_t n_tokens, ThreadPool& pool, double min_s) {
  const Matrix m = make_matrix(tr, s, make_weights(tr, s, 3));
  const kernels::WeightView& v = m.view;
  std::vector<float> x(s.cols * n_tokens), y(s.rows * n_tokens);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& e : x) e = normal(rng);
  kernels::matmul(v, x.data(), y.data(), n_tokens, pool);  // warm up
  double best = 1e30, total = 0;
  int reps = 0;
  while (reps < 2 || total < min_s) {
    const double t0 = now_s();
    kernels::matmul(v, x.data(), y.data(), n_tokens, pool);
    const double t = now_s() - t0;
    best = std::min(best, t);
    total += t;
    ++reps;
  }
  return 2.0 * s.rows * s.cols * n_tokens / best / 1e9;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

int run(const Options& opt) {
  std::printf("# bench_matmul\n\n");
  std::printf("- CPU: %s, %u hardware threads\n", cpu_model().c_str(), std::max(1u, std::thread::hardware_concurrency()));
  std::printf("- features: %s\n", kernels::cpu_features().describe().c_str());
  std::printf("- kernel level: %s\n", kernels::cpu_level_name(kernels::best_cpu_level()));
  std::printf("- compiler: %s\n\n", __VERSION__);
  const Shape gemv_shapes[] = {{4096, 4096}, {11008, 4096}, {8192, 2048}};
  const Shape gemm_shapes[] = {{4096, 4096}, opt.gemm2};
  const int64_t n_tokens = opt.quick ? 128 : 512;
  const double min_s = opt.quick ? 0.2 : 0.6;
  for (int n_threads : opt.threads) {
    ThreadPool pool(n_threads);
    const kernels::MachineLimits lim = kernels::measure_machine_limits(pool);
    std::printf("## %d thread%s: read %.1f GB/s, int8 peak %.0f GOP/s, f32 FMA peak %.0f GFLOP/s, bf16 peak %.0f GFLOP/s\n\n",
                n_threads, n_threads > 1 ? "s" : "", lim.read_bw_gbs, lim.peak_gops_int8, lim.peak_gflops_f32, lim.peak_gflops_bf16);
    std::printf("| type | act | tile | GEMV 4096x4096 GB/s | GEMV 11008x4096 GB/s | GEMV 8192x2048 GB/s | %% of read BW |"
                " GEMM 4096x4096x%lld GOP/s | GEMM %lldx%lldx%lld GOP/s | %% of peak |\n",
                static_cast<long long>(n_tokens), static_cast<long long>(opt.gemm2.rows),
                static_cast<long long>(opt.gemm2.cols), static_cast<long long>(n_tokens));
    std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const std::string& name : opt.types) {
      const quant::TypeTraits* tr = traits_by_name(name);
      const kernels::MatmulKernels* k = tr ? kernels::matmul_kernels(tr->type) : nullptr;
      if (!k) {
        std::printf("| %s | - | - | unsupported |\n", name.c_str());
        continue;
      }
      double gemv[3], gemm[2];
      for (int i = 0; i < 3; ++i) gemv[i] = bench_gemv(*tr, gemv_shapes[i], pool, min_s);
      for (int i = 0; i < 2; ++i) gemm[i] = bench_gemm(*tr, gemm_shapes[i], n_tokens, pool, min_s);
      const bool is_float = k->act_type == GgmlType::F32 || k->act_type == GgmlType::F16;
      const double peak = k->act_type == GgmlType::BF16 ? lim.peak_gflops_bf16 : is_float ? lim.peak_gflops_f32 : lim.peak_gops_int8;
      const double best_gemv = std::max({gemv[0], gemv[1], gemv[2]}), best_gemm = std::max(gemm[0], gemm[1]);
      std::printf("| %s | %s | %dx%d | %.1f | %.1f | %.1f | %.0f%% | %.0f | %.0f | %.0f%% |\n", name.c_str(),
                  std::string(gguf::type_name(k->act_type)).c_str(), k->max_rows, k->max_cols, gemv[0], gemv[1], gemv[2],
                  100.0 * best_gemv / lim.read_bw_gbs, gemm[0], gemm[1], peak > 0 ? 100.0 * best_gemm / peak : 0.0);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tern::bench

int main(int argc, char** argv) {
  tern::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_matmul: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--types") {
      opt.types = tern::bench::split(value());
    } else if (a == "--threads") {
      opt.threads.clear();
      for (const std::string& t : tern::bench::split(value())) opt.threads.push_back(std::max(1, std::atoi(t.c_str())));
    } else if (a == "--level") {
      setenv("TERN_CPU_LEVEL", value().c_str(), 1);  // read once, before the first kernel lookup
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--gemm2") {
      const std::string v = value();
      opt.gemm2 = {std::atoll(v.c_str()), std::atoll(v.c_str() + std::min(v.size(), v.find('x') + 1))};
      if (opt.gemm2.rows <= 0 || opt.gemm2.cols <= 0 || opt.gemm2.cols % 256 != 0) {
        std::fprintf(stderr, "bench_matmul: --gemm2 wants ROWSxCOLS, COLS a multiple of 256 (got %s)\n", v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: bench_matmul [--types Q4_0,Q8_0,...] [--threads 1,2] [--level avx2|scalar] [--quick] [--gemm2 ROWSxCOLS]\n");
      return 2;
    }
  }
  return tern::bench::run(opt);
}
