// core/thread_pool.h — a persistent pool for data-parallel loops.
//
// parallel_for(n, fn) cuts [0, n) into chunks and runs fn(begin, end,
// thread_index) over all of them on the calling thread plus the workers,
// returning when every chunk is done. Chunks are claimed dynamically, so a
// worker that the OS has descheduled (a busy machine) costs nothing: the
// caller simply runs the chunks itself instead of waiting for it.
//
// Claiming: one 64-bit atomic word holds (job generation << 32 | next chunk).
// A worker claims chunk i of job g by CAS on that word, which can only
// succeed while job g is live, so a late worker never runs a chunk of a
// finished job. Workers spin briefly after each job (consecutive loops of a
// forward pass come microseconds apart), then sleep on a condition variable.
// One parallel_for at a time per pool; thread_index < n_threads().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

class ThreadPool {
 public:
  using RangeFn = std::function<void(size_t begin, size_t end, int thread_index)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }
  // min_chunk: smallest range worth handing to a thread (amortises the claim).
  void parallel_for(size_t n, const RangeFn& fn, size_t min_chunk = 1);

  static int default_threads();

 private:
  void worker_loop(int index);
  // Claims and runs chunks of job `gen` until none are left.
  void run_chunks(uint32_t gen, int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;

  std::atomic<uint64_t> claim_{0};        // (generation << 32) | next chunk index
  std::atomic<const RangeFn*> fn_{nullptr};
  std::atomic<size_t> n_{0};
  std::atomic<size_t> chunk_{1};
  std::atomic<uint32_t> n_chunks_{0};
  std::atomic<uint32_t> done_{0};         // chunks finished in the current job

  std::mutex mutex_;
  std::condition_variable wake_;
  int n_sleeping_ = 0;                    // guarded by mutex_
  bool stop_ = false;                     // guarded by mutex_
};

}  // namespace tern
