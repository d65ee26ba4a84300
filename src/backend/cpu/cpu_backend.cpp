// The CPU backend: per-token element-wise work goes to the pool only when
// there is enough of it to pay for the hand-off (a prompt), and runs on the
// calling thread otherwise (decode), as the forward pass always did.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kv_quant.h"
#include "kernels/matmul_kernels.h"
#include "kernels/pack.h"
#include "kernels/ssm.h"
#include "backend/attention_blocks.h"
#include "backend/host_backend.h"

namespace tern::backend {
namespace {

// Drops the file pages wholly inside [p, p + n) from this process's resident
// set; they are read back from the file if anything touches them again.
void release_pages(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Maps the file pages covering [p, p + n) in one call instead of one fault per
// 4 KiB page (they are usually in the page cache already). Best effort: older
// kernels refuse MADV_POPULATE_READ and the pages then fault in as read.
void populate_pages(const void* p, size_t n) {
#ifdef MADV_POPULATE_READ
  const int advice = MADV_POPULATE_READ;
#else
  const int advice = 22;  // MADV_POPULATE_READ, Linux 5.14
#endif
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class CpuBackend final : public HostBackend {
 public:
  CpuBackend(int n_threads, bool pack)
      : pool_(n_threads > 0 ? n_threads : ThreadPool::default_threads()), pack_(pack) {}

  BackendKind kind() const override { return BackendKind::Cpu; }
  int n_threads() const override { return pool_.n_threads(); }

  void prepare_matrix(kernels::WeightView& w) override {
    if (!pack_) return;
    const kernels::MatmulKernels* k = kernels::matmul_kernels(w.traits->type);
    const size_t bytes = k ? kernels::packed_bytes(*k, w) : 0;
    if (bytes == 0) return;
    // 2 MiB alignment lets the kernel back the buffer with huge pages: far
    // fewer page faults while it is filled, and fewer TLB misses when read.
    // (The size is not rounded up: a partial last huge page stays in 4 KiB pages.)
    constexpr size_t kHuge = size_t{2} << 20;
    void* buf = nullptr;
    if (posix_memalign(&buf, kHuge, bytes) != 0) return;  // out of memory: this matrix stays in place
    madvise(buf, bytes / kHuge * kHuge, MADV_HUGEPAGE);
    const size_t file_bytes = static_cast<size_t>(w.n_rows) * w.row_stride_bytes;
    populate_pages(w.data, file_bytes);
    kernels::pack_weights(*k, w, buf, &pool_);
    packed_.push_back({std::unique_ptr<uint8_t, FreeDeleter>(static_cast<uint8_t*>(buf)), bytes,
                       {static_cast<const uint8_t*>(w.data), file_bytes}});
    w.packed = buf;
    if (w.file_backed) release_pages(w.data, file_bytes);
  }
  const float* upload(std::span<const float> v) override { return v.data(); }
  uint64_t prepared_bytes() const override {
    uint64_t n = 0;
    for (const Packed& p : packed_) n += p.bytes;
    return n;
  }
  std::vector<std::span<const uint8_t>> packed_sources() const override {
    std::vector<std::span<const uint8_t>> v;
    for (const Packed& p : packed_) v.push_back(p.source);
    return v;
  }
  std::vector<std::span<const uint8_t>> packed_buffers() const override {
    std::vector<std::span<const uint8_t>> v;
    for (const Packed& p : packed_) v.emplace_back(p.buf.get(), p.bytes);
    return v;
  }

  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    rows(n_rows, n, [&](int64_t t) { kernels::rms_norm(x + t * n, weight, y + t * n, n, eps); });
  }
  void matmul(const kernels::WeightView& w, const float* x, float* y, int64_t n_rows) override {
    kernels::matmul(w, x, y, n_rows, pool_);
  }
  void matmul_group(std::span<const MatmulJob> jobs, const float* x, int64_t n_rows) override {
    std::array<kernels::MatmulJob, 4> k{};
    for (size_t j = 0; j < jobs.size(); ++j) k[j] = {jobs[j].w, jobs[j].y};
    kernels::matmul_group(k.data(), static_cast<int>(jobs.size()), x, n_rows, pool_);
  }
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n) override {
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t i = 0; i < n; ++i) x[t * n + i] += bias[i];
  }
  void add(float* x, const float* y, int64_t n_rows, int64_t n) override {
    rows(n_rows, n, [&](int64_t t) {
      float* xr = x + t * n;
      const float* yr = y + t * n;
      for (int64_t i = 0; i < n; ++i) xr[i] += yr[i];
    });
  }
  void rope(float* x, int64_t n_rows, int n_heads, int head_dim, std::span<const int32_t> positions,
            const kernels::RopeParams& p) override {
    const int64_t n = static_cast<int64_t>(n_heads) * head_dim;
    rows(n_rows, n, [&](int64_t t) { kernels::rope(x + t * n, n_heads, head_dim, positions[t], p); });
  }
  void swiglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    rows(n_rows, n, [&](int64_t t) { kernels::swiglu(gate + t * n, up + t * n, n); });
  }
  void geglu(float* gate, const float* up, int64_t n_rows, int64_t n) override {
    rows(n_rows, n, [&](int64_t t) { kernels::geglu(gate + t * n, up + t * n, n); });
  }
  void softcap(float* x, int64_t n_rows, int64_t n, float cap) override {
    rows(n_rows, n, [&](int64_t t) { kernels::softcap(x + t * n, n, cap); });
  }
  // One f32 multiply-add per element in index order, so a token's sum has the
  // same order whatever else the call holds (batch invariance). Parallel over
  // column ranges: repeated rows never race.
  void scatter_add(const float* y, std::span<const int32_t> dst_rows, std::span<const float> weights, float* out,
                   int64_t n) override {
    auto cols = [&](int64_t c0, int64_t c1) {
      for (size_t i = 0; i < dst_rows.size(); ++i) {
        const float w = weights[i];
        const float* yr = y + static_cast<int64_t>(i) * n;
        float* o = out + static_cast<int64_t>(dst_rows[i]) * n;
        for (int64_t j = c0; j < c1; ++j) o[j] += w * yr[j];
      }
    };
    constexpr int64_t kMinParallel = 1 << 15;  // elements, as rows()
    const int64_t total = static_cast<int64_t>(dst_rows.size()) * n;
    if (total < kMinParallel || n < 64) return cols(0, n);
    const size_t n_chunks = static_cast<size_t>(n / 16);  // 16-float (64-byte) column chunks
    pool_.parallel_for(n_chunks, [&](size_t b, size_t e, int) {
      cols(static_cast<int64_t>(b) * 16, e == n_chunks ? n : static_cast<int64_t>(e) * 16);
    });
  }
  void matmul_experts(std::span<const ExpertJob> jobs) override {
    expert_jobs_.clear();
    for (const ExpertJob& j : jobs) expert_jobs_.push_back({j.w, j.x, j.y, j.n_rows});
    kernels::matmul_experts(expert_jobs_, pool_);
  }
  // Rows to their slots across the pool (a prompt's q8_0 rows are worth quantizing in parallel),
  // by the SIMD codec: each row's bytes are what HostBackend's scalar one writes.
  void store_kv(const KvPoolView& pool, int layer, std::span<const int64_t> slots, const float* k,
                const float* v) override {
    const int n = pool.n_kv_head * pool.head_dim;
    rows(static_cast<int64_t>(slots.size()), n, [&](int64_t t) {
      for (int kv = 0; kv < 2; ++kv)
        kernels::encode_kv_row(pool.type, (kv == 0 ? k : v) + t * n, pool.n_kv_head, pool.head_dim,
                               pool.slot_row(slots[static_cast<size_t>(t)], layer, kv));
    });
  }
  void attention(const kernels::AttentionShape& shape, const AttentionInput& in, const float* q, float* out) override {
    build_attention_blocks(shape, in, q, out, blocks_);
    kernels::attention(shape, blocks_, pool_);
    add_attention_mass(shape, in, blocks_);
  }

  // Runs x 16-channel chunks across the pool once a pass has enough of them
  // (a channel's result does not depend on the split: kernels/ssm.h).
  void ssm_conv(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const float* x, int64_t x_stride,
                const float* w, const float* bias, float* out) override {
    ssm_chunks(dims, runs, dims.d_conv, [&](const SsmRun& r, int c0, int c1) {
      kernels::ssm_kernels().conv(ssm_conv_args(dims, r, x, x_stride, w, bias, out), c0, c1);
    });
  }
  void ssm_scan(const kernels::SsmDims& dims, std::span<const SsmRun> runs, const SsmScanInput& in,
                float* y) override {
    ssm_chunks(dims, runs, dims.d_state, [&](const SsmRun& r, int c0, int c1) {
      kernels::ssm_kernels().scan(ssm_scan_args(dims, r, in, y), c0, c1);
    });
  }

 private:
  // Runs fn(t) for every row: on the pool when there is enough work, inline otherwise.
  template <class Fn>
  void rows(int64_t n_rows, int64_t elems_per_row, Fn&& fn) {
    constexpr int64_t kMinParallel = 1 << 15;  // elements
    if (n_rows < 2 || n_rows * elems_per_row < kMinParallel) {
      for (int64_t t = 0; t < n_rows; ++t) fn(t);
      return;
    }
    pool_.parallel_for(static_cast<size_t>(n_rows), [&](size_t b, size_t e, int) {
      for (size_t t = b; t < e; ++t) fn(static_cast<int64_t>(t));
    });
  }

  // fn(run, c0, c1) over every run and 16-channel chunk; work_per_channel
  // (elements per channel and token) decides whether the pool pays.
  template <class Fn>
  void ssm_chunks(const kernels::SsmDims& dims, std::span<const SsmRun> runs, int work_per_channel, Fn&& fn) {
    constexpr int kChunk = 16;
    const int n_chunks = (dims.d_inner + kChunk - 1) / kChunk;
    int64_t n_tokens = 0;
    for (const SsmRun& r : runs) n_tokens += r.n_tokens;
    auto one = [&](size_t i) {
      const SsmRun& r = runs[i / static_cast<size_t>(n_chunks)];
      const int c0 = static_cast<int>(i % static_cast<size_t>(n_chunks)) * kChunk;
      fn(r, c0, std::min(c0 + kChunk, dims.d_inner));
    };
    const size_t n_items = runs.size() * static_cast<size_t>(n_chunks);
    constexpr int64_t kMinParallel = 1 << 15;  // elements, as rows()
    if (n_tokens * dims.d_inner * work_per_channel < kMinParallel) {
      for (size_t i = 0; i < n_items; ++i) one(i);
      return;
    }
    pool_.parallel_for(n_items, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i) one(i);
    });
  }

  ThreadPool pool_;
  bool pack_;
  struct Packed {
    std::unique_ptr<uint8_t, FreeDeleter> buf;  // owner of a WeightView::packed
    size_t bytes;
    std::span<const uint8_t> source;  // what it was packed from (no longer read)
  };
  std::vector<Packed> packed_;
  std::vector<kernels::QueryBlock> blocks_;  // attention's per-call list, reused
  std::vector<kernels::ExpertMatmulJob> expert_jobs_;  // matmul_experts' per-call list, reused
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads, bool pack) {
  return std::make_unique<CpuBackend>(n_threads, pack);
}

}  // namespace tern::backend
