#include "kernels/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mlxcpp::kernels {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// How long an idle worker (or the waiting caller) spins before sleeping: long enough to bridge
// the gap between two kernels of one decode step, short enough to hand the core back quickly
// when the machine is oversubscribed.
constexpr auto kSpin = std::chrono::microseconds(100);

// Spins on `a` while it equals `old`, then sleeps on it (futex).
template <class T>
void wait_while_equal(const std::atomic<T>& a, T old) {
  auto start = std::chrono::steady_clock::now();
  for (int spins = 0; a.load(std::memory_order_acquire) == old; ++spins) {
    cpu_relax();
    if (spins % 128 == 127 && std::chrono::steady_clock::now() - start > kSpin) {
      a.wait(old, std::memory_order_acquire);
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain() {
  uint64_t w = job_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t tasks = (w >> kFieldBits) & kFieldMask, next = w & kFieldMask;
    if (next >= tasks) return;
    if (!job_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Task `next` is ours and unfinished, so this job (and fn_/ctx_) stays current meanwhile.
    fn_(ctx_, static_cast<int>(next));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int>(tasks)) done_.notify_all();
    w = job_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run(int tasks, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t id = ((job_.load(std::memory_order_relaxed) >> (2 * kFieldBits)) + 1) & 0xFFFFFF;
  job_.store((id << (2 * kFieldBits)) | (static_cast<uint64_t>(tasks) << kFieldBits), std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  drain();
  for (int d = done_.load(std::memory_order_acquire); d < tasks; d = done_.load(std::memory_order_acquire)) {
    wait_while_equal(done_, d);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;  // the value at construction: a job or shutdown before this thread ran is not missed
  for (;;) {
    wait_while_equal(wake_, seen);
    seen = wake_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    drain();
  }
}

}  // namespace mlxcpp::kernels
