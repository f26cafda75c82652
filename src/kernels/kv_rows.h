// The fast path's own storage for a ragged batch: each sequence's keys and values of one layer
// in a buffer of its own (no left padding, no shared write position), outside MLX's graph. The
// block kernels write (and grow) them in place; a row joins or leaves a batch by moving its
// pointer, never by copying the other rows. Host reads (copy_out) must come after the kernels
// that wrote the rows were evaluated.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mlxcpp::kernels {

class KVRowBuffer {
 public:
  static constexpr int kStep = 256;  // capacity grows in steps of this many rows (as KVCache's)

  KVRowBuffer() = default;
  KVRowBuffer(const KVRowBuffer&) = delete;
  KVRowBuffer& operator=(const KVRowBuffer&) = delete;

  // Room for `rows` rows per kv head, the first `keep` rows of each kept. The first call fixes
  // the layout ([kv_heads, cap, head_dim] keys, the same for values; float16 bit patterns with
  // f16, else float32); later calls must pass the same (Error otherwise).
  void reserve(int kv_heads, int head_dim, bool f16, int rows, int keep);
  bool laid_out() const { return kv_heads_ > 0; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  bool f16() const { return f16_; }
  int cap() const { return cap_; }
  void* keys() { return keys_.get(); }
  void* values() { return values_.get(); }
  // Bytes held (safe to read while a kernel grows the buffer).
  int64_t nbytes() const { return nbytes_.load(std::memory_order_relaxed); }

  // Rows [0, n) of every head into dst_k / dst_v ([kv_heads, n, head_dim] each, this buffer's
  // element type); from src into a buffer reserved for at least n rows.
  void copy_out(int n, void* dst_k, void* dst_v) const;
  void copy_in(int n, const void* src_k, const void* src_v);
  // A new buffer holding rows [0, n) of every head (capacity for n).
  std::shared_ptr<KVRowBuffer> prefix(int n) const;

 private:
  size_t elem() const { return f16_ ? 2 : 4; }
  struct Free {
    void operator()(std::byte* p) const;
  };
  using Buffer = std::unique_ptr<std::byte[], Free>;
  static Buffer allocate(size_t bytes);

  int kv_heads_ = 0, head_dim_ = 0, cap_ = 0;
  bool f16_ = false;
  Buffer keys_, values_;
  std::atomic<int64_t> nbytes_{0};
};

// A ragged batch's caches of one layer for one block call: row b's buffer and the number of
// tokens it holds before the call (its write position and the RoPE position of its first new
// token).
struct RaggedRows {
  std::vector<std::shared_ptr<KVRowBuffer>> rows;
  std::vector<int> pos;
};

}  // namespace mlxcpp::kernels
