#include "kernels/kv_rows.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp::kernels {

namespace {
constexpr std::align_val_t kAlign{64};
}

void KVRowBuffer::Free::operator()(std::byte* p) const { ::operator delete[](p, kAlign); }

KVRowBuffer::Buffer KVRowBuffer::allocate(size_t bytes) {
  return Buffer(static_cast<std::byte*>(::operator new[](bytes, kAlign)));
}

void KVRowBuffer::reserve(int kv_heads, int head_dim, bool f16, int rows, int keep) {
  if (kv_heads <= 0 || head_dim <= 0 || rows < 0 || keep < 0 || keep > cap_) {
    throw Error(fmt::format("[KVRowBuffer::reserve] bad request: kv_heads {}, head_dim {}, rows {}, keep {} (cap {})",
                            kv_heads, head_dim, rows, keep, cap_));
  }
  if (laid_out() && (kv_heads != kv_heads_ || head_dim != head_dim_ || f16 != f16_)) {
    throw Error(fmt::format("[KVRowBuffer::reserve] layout {}x{} {} asked of a {}x{} {} buffer", kv_heads, head_dim,
                            f16 ? "float16" : "float32", kv_heads_, head_dim_, f16_ ? "float16" : "float32"));
  }
  kv_heads_ = kv_heads;
  head_dim_ = head_dim;
  f16_ = f16;
  if (rows <= cap_) return;
  const int cap = (rows + kStep - 1) / kStep * kStep;
  const size_t head_old = static_cast<size_t>(cap_) * head_dim * elem(), head_new = static_cast<size_t>(cap) * head_dim * elem();
  auto grow = [&](Buffer& b) {
    Buffer n = allocate(head_new * kv_heads);
    for (int h = 0; h < kv_heads && keep > 0; ++h) {
      std::memcpy(n.get() + h * head_new, b.get() + h * head_old, static_cast<size_t>(keep) * head_dim * elem());
    }
    b = std::move(n);
  };
  grow(keys_);
  grow(values_);
  cap_ = cap;
  nbytes_.store(static_cast<int64_t>(2 * head_new * kv_heads), std::memory_order_relaxed);
}

void KVRowBuffer::copy_out(int n, void* dst_k, void* dst_v) const {
  if (n < 0 || n > cap_) throw Error(fmt::format("[KVRowBuffer::copy_out] {} rows of a buffer of {}", n, cap_));
  const size_t row = static_cast<size_t>(head_dim_) * elem(), head = cap_ * row;
  for (int h = 0; h < kv_heads_; ++h) {
    std::memcpy(static_cast<std::byte*>(dst_k) + h * n * row, keys_.get() + h * head, n * row);
    std::memcpy(static_cast<std::byte*>(dst_v) + h * n * row, values_.get() + h * head, n * row);
  }
}

void KVRowBuffer::copy_in(int n, const void* src_k, const void* src_v) {
  if (n < 0 || n > cap_) throw Error(fmt::format("[KVRowBuffer::copy_in] {} rows into a buffer of {}", n, cap_));
  const size_t row = static_cast<size_t>(head_dim_) * elem(), head = cap_ * row;
  for (int h = 0; h < kv_heads_; ++h) {
    std::memcpy(keys_.get() + h * head, static_cast<const std::byte*>(src_k) + h * n * row, n * row);
    std::memcpy(values_.get() + h * head, static_cast<const std::byte*>(src_v) + h * n * row, n * row);
  }
}

}  // namespace mlxcpp::kernels
