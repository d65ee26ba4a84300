// core/thread_pool.h — a persistent pool for data-parallel loops.
//
// parallel_for(n, fn) splits [0, n) into one contiguous range per thread and
// runs fn(begin, end, thread_index) on the calling thread plus n_threads-1
// workers, returning when all ranges are done. One parallel_for at a time per
// pool (the engine's forward pass is single-threaded at the top level).
// Workers spin briefly before sleeping so that back-to-back loops in one
// forward pass do not pay a futex wake-up each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
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
  void parallel_for(size_t n, const RangeFn& fn);

  static int default_threads();

 private:
  void worker_loop(int index);
  void run_share(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  const RangeFn* fn_ = nullptr;
  size_t n_ = 0;
};

}  // namespace tern
