#include "kernels/kv_rows.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp::kernels {

namespace {
constexpr std::align_val_t kAlign{64};

// Rows [0, n) of each of `heads` heads of `row` bytes, from src (a head every src_cap rows) to
// dst (a head every dst_cap rows).
void copy_heads(void* dst, int dst_cap, const void* src, int src_cap, int heads, int n, size_t row) {
  for (int h = 0; h < heads && n > 0; ++h) {
    std::memcpy(static_cast<std::byte*>(dst) + static_cast<size_t>(h) * dst_cap * row,
                static_cast<const std::byte*>(src) + static_cast<size_t>(h) * src_cap * row,
                n * row);
  }
}
}  // namespace

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
  const size_t row = static_cast<size_t>(head_dim) * elem();
  auto grow = [&](Buffer& b) {
    Buffer n = allocate(row * cap * kv_heads);
    copy_heads(n.get(), cap, b.get(), cap_, kv_heads, keep, row);
    b = std::move(n);
  };
  grow(keys_);
  grow(values_);
  cap_ = cap;
  nbytes_.store(static_cast<int64_t>(2 * row * cap * kv_heads), std::memory_order_relaxed);
}

void KVRowBuffer::copy_out(int n, void* dst_k, void* dst_v) const {
  if (n < 0 || n > cap_) throw Error(fmt::format("[KVRowBuffer::copy_out] {} rows of a buffer of {}", n, cap_));
  const size_t row = static_cast<size_t>(head_dim_) * elem();
  copy_heads(dst_k, n, keys_.get(), cap_, kv_heads_, n, row);
  copy_heads(dst_v, n, values_.get(), cap_, kv_heads_, n, row);
}

std::shared_ptr<KVRowBuffer> KVRowBuffer::prefix(int n) const {
  auto out = std::make_shared<KVRowBuffer>();
  if (!laid_out() || n == 0) return out;
  if (n < 0 || n > cap_) throw Error(fmt::format("[KVRowBuffer::prefix] {} rows of a buffer of {}", n, cap_));
  out->reserve(kv_heads_, head_dim_, f16_, n, 0);
  const size_t row = static_cast<size_t>(head_dim_) * elem();
  copy_heads(out->keys_.get(), out->cap_, keys_.get(), cap_, kv_heads_, n, row);
  copy_heads(out->values_.get(), out->cap_, values_.get(), cap_, kv_heads_, n, row);
  return out;
}

void KVRowBuffer::copy_in(int n, const void* src_k, const void* src_v) {
  if (n < 0 || n > cap_) throw Error(fmt::format("[KVRowBuffer::copy_in] {} rows into a buffer of {}", n, cap_));
  const size_t row = static_cast<size_t>(head_dim_) * elem();
  copy_heads(keys_.get(), cap_, src_k, n, kv_heads_, n, row);
  copy_heads(values_.get(), cap_, src_v, n, kv_heads_, n, row);
}

}  // namespace mlxcpp::kernels
