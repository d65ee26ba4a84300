#include "core/thread_pool.h"

#include <algorithm>

namespace tern {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
constexpr int kSpinIterations = 1 << 14;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

void ThreadPool::run_chunks(uint32_t gen, int thread_index) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(word >> 32) != gen) return;
    const uint32_t i = static_cast<uint32_t>(word);
    // Fields read before the claim belong to job `gen` if the claim succeeds:
    // the job cannot finish (and be replaced) while chunk i is unclaimed.
    const uint32_t n_chunks = n_chunks_.load(std::memory_order_acquire);
    if (i >= n_chunks) return;
    const RangeFn* fn = fn_.load(std::memory_order_acquire);
    const size_t n = n_.load(std::memory_order_acquire), chunk = chunk_.load(std::memory_order_acquire);
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    const size_t begin = static_cast<size_t>(i) * chunk;
    (*fn)(begin, std::min(n, begin + chunk), thread_index);
    done_.fetch_add(1, std::memory_order_acq_rel);
    word = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(size_t n, const RangeFn& fn, size_t min_chunk) {
  if (n == 0) return;
  if (n_threads_ == 1 || n <= min_chunk) {
    fn(0, n, 0);
    return;
  }
  // A few chunks per thread balance uneven progress without much claim traffic.
  const size_t target_chunks = static_cast<size_t>(n_threads_) * 4;
  const size_t chunk = std::max(std::max<size_t>(1, min_chunk), (n + target_chunks - 1) / target_chunks);
  const auto n_chunks = static_cast<uint32_t>((n + chunk - 1) / chunk);

  const uint64_t old = claim_.load(std::memory_order_relaxed);
  const uint32_t gen = static_cast<uint32_t>(old >> 32) + 1;
  // Close the finished job first: a worker still holding its last claim word
  // (gen-1, i) could otherwise see the fields below already rewritten and
  // win a CAS on that stale word, running a chunk of this job before it is
  // published. After the close no old word matches, and the release stores
  // below order the close before any field a worker can read.
  claim_.store((old & 0xFFFFFFFF00000000ull) | 0xFFFFFFFFull, std::memory_order_seq_cst);
  fn_.store(&fn, std::memory_order_release);
  n_.store(n, std::memory_order_release);
  chunk_.store(chunk, std::memory_order_release);
  n_chunks_.store(n_chunks, std::memory_order_release);
  done_.store(0, std::memory_order_release);
  claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);  // publishes the job
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n_sleeping_ > 0) wake_.notify_all();
  }
  run_chunks(gen, 0);
  // Only chunks that a running worker already claimed remain; wait for those.
  while (done_.load(std::memory_order_acquire) != n_chunks) cpu_relax();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++n_sleeping_;
      wake_.wait(lock, [&] {
        return stop_ || static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32) != seen;
      });
      --n_sleeping_;
      if (stop_) return;
      continue;
    }
    seen = gen;
    run_chunks(gen, index);
  }
}

}  // namespace tern
