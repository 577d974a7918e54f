// A persistent pool of worker threads for graph_ir._binding, blocked on a condition variable between calls: no
// thread is started per call (that cost 1-4 ms a call on a busy machine) and no worker spins while it waits.
#pragma once

#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace graph_ir_cc {

// One call uses the pool at a time; a call that finds it busy (another Python thread, the GIL released) runs its
// whole task on the calling thread.
class WorkerPool {
 public:
  // The process's pool, made on first use (with the GIL held, so never twice at once) and made anew in a forked
  // child, which inherits no threads. Never destroyed: the blocked workers end with the process.
  static WorkerPool& instance() {
    static WorkerPool* pool = nullptr;
    if (pool == nullptr || pool->owner_ != getpid()) {
      pool = new WorkerPool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1);
    }
    return *pool;
  }

  int workers() const { return workers_; }

  // task() on the calling thread and on up to `helpers` workers at once (at most workers()); returns when all that
  // started are done. task must claim work from a shared counter until none is left: when the caller's task()
  // returns, nothing is left, so helpers not yet woken are called off (no wait for a descheduled worker to wake).
  // When the pool is busy, task() runs on the calling thread alone.
  void run(int helpers, const std::function<void()>& task) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    helpers = std::min(helpers, workers_);
    if (!busy.owns_lock() || helpers <= 0) {
      task();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      csr_ = get_csr();
      task_ = &task;
      unclaimed_ = helpers;
      running_ = helpers;
    }
    wake_.notify_all();
    task();
    std::unique_lock<std::mutex> lock(mutex_);
    running_ -= unclaimed_;
    unclaimed_ = 0;
    done_.wait(lock, [this] { return running_ == 0; });
    task_ = nullptr;
  }

 private:
  explicit WorkerPool(int workers) : workers_(std::max(workers, 0)), owner_(getpid()) {
    for (int i = 0; i < workers_; ++i) std::thread([this] { loop(); }).detach();
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return unclaimed_ > 0; });
      --unclaimed_;
      const std::function<void()>* task = task_;
      set_csr(csr_);  // the caller's rounding and FTZ/DAZ (graph_ir/executors/denormals.py), as TF's pools run
      lock.unlock();
      (*task)();
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  // The SSE control and status register (MXCSR): a worker computes as the calling thread does.
  static unsigned get_csr() {
#if defined(__SSE__)
    return _mm_getcsr();
#else
    return 0;
#endif
  }
  static void set_csr(unsigned csr) {
#if defined(__SSE__)
    _mm_setcsr(csr);
#else
    (void)csr;
#endif
  }

  const int workers_;
  const pid_t owner_;
  std::mutex busy_;   // held by the call using the pool
  std::mutex mutex_;  // guards task_, unclaimed_, running_
  std::condition_variable wake_, done_;
  const std::function<void()>* task_ = nullptr;
  int unclaimed_ = 0;  // helpers still to start the task
  int running_ = 0;    // helpers that have not finished it
  unsigned csr_ = 0;   // the caller's MXCSR, for the helpers
};

}  // namespace graph_ir_cc
