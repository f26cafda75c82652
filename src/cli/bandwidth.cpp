#include "cli/bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "core/errors.h"
#include "kernels/cpu_features.h"

namespace mlxcpp::cli {

namespace {

constexpr size_t kAlign = 4096;

// Each reader sums 64-bit lanes with four independent accumulators so the loop is bound by
// loads, not by the add chain. `n` is a multiple of 256 bytes.
__attribute__((target("avx512f"))) uint64_t sum_avx512(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t v : lanes) s += v;
  return s;
}

__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t sum_scalar(const uint8_t* p, size_t n) {
  const auto* q = reinterpret_cast<const uint64_t*>(p);
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i < n / 8; i += 4) {
    a0 += q[i];
    a1 += q[i + 1];
    a2 += q[i + 2];
    a3 += q[i + 3];
  }
  return a0 + a1 + a2 + a3;
}

using SumFn = uint64_t (*)(const uint8_t*, size_t);

SumFn pick_sum() {
  if (kernels::isa_supported(kernels::Isa::kAvx512)) return sum_avx512;
  if (kernels::isa_supported(kernels::Isa::kAvx2)) return sum_avx2;
  return sum_scalar;
}

// Runs fn(slice_begin, slice_bytes) on `threads` threads over equal 256-byte-aligned slices.
template <class Fn>
void parallel_slices(uint8_t* buf, size_t bytes, int threads, Fn fn) {
  const size_t slice = bytes / threads / 256 * 256;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([=] { fn(buf + t * slice, slice); });
  for (auto& th : pool) th.join();
}

}  // namespace

BandwidthResult measure_read_bandwidth(size_t bytes, int threads, int passes) {
  if (threads <= 0) throw RequestError(fmt::format("[bandwidth] threads must be positive, got {}", threads));
  if (passes <= 0) throw RequestError(fmt::format("[bandwidth] passes must be positive, got {}", passes));
  bytes = bytes / (256 * static_cast<size_t>(threads)) * 256 * threads;
  if (bytes == 0) throw RequestError("[bandwidth] the buffer is smaller than 256 bytes per thread");
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign)), &std::free);
  if (!buf) throw Error(fmt::format("[bandwidth] could not allocate {} bytes", bytes));
  parallel_slices(buf.get(), bytes, threads, [](uint8_t* p, size_t n) { std::memset(p, 1, n); });
  const SumFn sum = pick_sum();
  std::atomic<uint64_t> sink{0};
  auto read_all = [&] {
    parallel_slices(buf.get(), bytes, threads, [&](uint8_t* p, size_t n) { sink += sum(p, n); });
  };
  read_all();  // warm-up: page tables, thread start-up paths
  BandwidthResult r;
  r.bytes = bytes;
  r.threads = threads;
  for (int i = 0; i < passes; ++i) {
    auto tic = std::chrono::steady_clock::now();
    read_all();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tic).count();
    r.gbps.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  if (sink.load() == 42) std::fputs("", stderr);  // keeps the sums observable
  std::vector<double> sorted = r.gbps;
  std::sort(sorted.begin(), sorted.end());
  r.median_gbps = sorted[sorted.size() / 2];
  if (sorted.size() % 2 == 0) r.median_gbps = (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  r.max_gbps = sorted.back();
  return r;
}

}  // namespace mlxcpp::cli
