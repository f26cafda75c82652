// A persistent pool for our CPU kernels: threads are created once, spin briefly between jobs
// (decode steps issue kernels back to back) and then sleep on a futex. The calling thread
// takes part, so a pool of n runs n tasks at once with n - 1 extra threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace mlxcpp::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(task) for task in [0, tasks); returns when all are done. Not reentrant: one job
  // at a time (kernels run on MLX's single CPU stream thread).
  template <class F>
  void parallel_for(int tasks, F&& fn) {
    if (tasks <= 0) return;
    if (tasks == 1 || workers_.empty()) {
      for (int t = 0; t < tasks; ++t) fn(t);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run(tasks, [](void* ctx, int t) { (*static_cast<Fn*>(ctx))(t); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void*, int);
  void run(int tasks, TaskFn fn, void* ctx);
  void worker_loop();
  // Claims and runs tasks of the current job until none is left.
  void drain();

  // The job word packs [job id : 24][tasks : 20][next task : 20], so claiming a task (a CAS on
  // it) can never take an index of a job other than the one whose size it checked.
  static constexpr uint64_t kFieldBits = 20;
  static constexpr uint64_t kFieldMask = (uint64_t{1} << kFieldBits) - 1;

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> job_{0};
  std::atomic<uint32_t> wake_{0};  // bumped per job and at shutdown; idle workers sleep on it
  std::atomic<int> done_{0};       // tasks of the current job finished
  std::atomic<bool> stop_{false};
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace mlxcpp::kernels
