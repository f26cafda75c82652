// What our CPU kernels run with: the ISA to use and the persistent thread pool. One per loaded
// model (held by shared_ptr in layers and in every primitive built from them), never global.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

namespace mlxcpp::kernels {

struct KernelOptions {
  Isa isa = best_isa();
  int threads = 0;  // 0: the physical cores of this process
  bool profile = false;  // accumulate time spent inside our primitives (see kernel_seconds)
  // Quantized matmuls as integer dot products on int16 activations where the ISA has them
  // (decode GEMVs: AVX2 and up, 4/5/6/8-bit; prefill GEMMs: AVX2 and up, 2..8-bit); false keeps every
  // product in float32 (--f32-dot).
  bool int_dot = true;
  // The fused attention blocks store new KV caches in float16 (half the bytes a decode step
  // reads per cached token; llama.cpp's default cache type); false keeps float32 (--kv-f32).
  // A cache already holding float32 rows stays float32.
  bool kv_f16 = true;
  // 4-, 5-, 6- and 8-bit quantized weights are rewritten at load in the integer kernels' kRows8 layout
  // (qmatmul.h: one sequential stream per 8 rows, no horizontal sums; decode GEMV ~1.3x) where
  // those kernels run (AVX2 and up, int_dot); false keeps MLX's layout (--mlx-layout).
  bool repack = true;
};

class KernelContext {
 public:
  explicit KernelContext(const KernelOptions& opts = {});
  Isa isa() const { return isa_; }
  bool int_dot() const { return int_dot_; }
  bool kv_f16() const { return kv_f16_; }
  // Whether loading rewrites quantized weights in the kRows8 layout (KernelOptions::repack, on an
  // ISA with the integer kernels).
  bool repack() const { return repack_; }
  int threads() const { return pool_->size(); }
  // Times a primitive's work when profiling.
  class Timer {
   public:
    explicit Timer(const KernelContext& c) : c_(c), t0_(c.profiling() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
    ~Timer() {
      if (c_.profiling()) c_.add_kernel_time(std::chrono::steady_clock::now() - t0_);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    const KernelContext& c_;
    std::chrono::steady_clock::time_point t0_;
  };

  // Kernels run on MLX's CPU stream thread, one at a time; the pool is theirs.
  ThreadPool& pool() const { return *pool_; }

  // With KernelOptions::profile: wall time inside our primitives' eval (on MLX's CPU stream
  // thread) since construction or the last reset; lets a benchmark split a decode step into
  // graph build, MLX dispatch and kernel time.
  bool profiling() const { return profile_; }
  void add_kernel_time(std::chrono::nanoseconds t) const { kernel_ns_.fetch_add(t.count(), std::memory_order_relaxed); }
  double kernel_seconds() const { return static_cast<double>(kernel_ns_.load()) * 1e-9; }
  void reset_kernel_time() const { kernel_ns_.store(0); }

  // KV-cache buffers a fused attention block had to copy before writing (0 in a plain decode).
  void count_cache_copy() const { cache_copies_.fetch_add(1, std::memory_order_relaxed); }
  int64_t cache_copies() const { return cache_copies_.load(); }

 private:
  Isa isa_;
  bool int_dot_;
  bool kv_f16_;
  bool repack_;
  std::unique_ptr<ThreadPool> pool_;
  bool profile_;
  mutable std::atomic<int64_t> kernel_ns_{0};
  mutable std::atomic<int64_t> cache_copies_{0};
};

}  // namespace mlxcpp::kernels
