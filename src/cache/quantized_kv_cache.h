// mlx_lm/models/cache.py QuantizedKVCache: keys and values stored affine-quantized (mx.quantize,
// `bits` 2/4/8, `group_size` 32/64/128 along head_dim), grown in steps of 256 rows like KVCache,
// and attended without dequantizing (quantized_attention in nn/attention.h). A KVCache becomes
// one once it holds quantized_kv_start tokens (generate.py maybe_quantize_kv_cache).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <utility>

#include "cache/kv_cache.h"

namespace mlxcpp {

// One quantized tensor as mx.quantize returns it: packed uint32 rows, scales, biases.
struct QuantizedRows {
  mlx::core::array w, scales, biases;
};

// --kv-bits / --kv-group-size / --quantized-kv-start (generate_step's kv_bits, kv_group_size,
// quantized_kv_start).
struct KvQuantization {
  int bits = 8;
  int group_size = 64;
  int start = 5000;  // DEFAULT_QUANTIZED_KV_START
};

// RequestError naming the option for bits outside {2, 4, 8}, group sizes outside {32, 64, 128}
// or a negative start.
void check_kv_quantization(const KvQuantization& q);

// What attention reads a quantized cache through (nn/attention.h cached_attention), single or
// batched.
class QuantizedFetch {
 public:
  virtual ~QuantizedFetch() = default;
  // Quantizes the (B, H, S, D) keys/values into the buffers and returns the rows the new
  // queries attend to, of both.
  virtual std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                             const mlx::core::array& values) = 0;
  virtual int group_size() const = 0;
  virtual int bits() const = 0;
};

// A quantized cache the fused attention block writes itself (QuantizedKVCache,
// BatchQuantizedKVCache; bits and group size are its QuantizedFetch's), as KVCache's
// take_for_update / commit_update: the buffers (keys' w, scales, biases, then values'), grown for
// n more rows as update_and_fetch_quantized would grow them, handed over (the cache keeps no
// reference) and taken back with the n rows written; exclusive() tells whether no array outside
// the cache shares them (then the block may write in place).
class QuantizedBlockCache {
 public:
  virtual ~QuantizedBlockCache() = default;
  // scale_dtype: of a new cache's scales and biases (an existing cache keeps its own).
  virtual std::array<mlx::core::array, 6> take_for_update(int batch, int heads, int n, int dim,
                                                          mlx::core::Dtype scale_dtype) = 0;
  virtual void commit_update(std::array<mlx::core::array, 6> buffers, int n, bool exclusive) = 0;
  virtual bool exclusive() const = 0;
  // The scales' and biases' dtype; nullopt while empty.
  virtual std::optional<mlx::core::Dtype> scale_dtype() const = 0;
};

// mx.quantize of x along its last axis (RequestError where group_size does not divide it).
QuantizedRows quantize_rows(const mlx::core::array& x, int group_size, int bits);

// A cache whose keys and values are stored quantized.
class QuantizedCache : public KVCacheBase, public QuantizedFetch {
 public:
  // Dense keys/values cannot come out of such a cache: throws Error.
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array& keys,
                                                                 const mlx::core::array& values) override;
  int group_size() const override { return group_size_; }
  int bits() const override { return bits_; }

 protected:
  QuantizedCache(int group_size, int bits);
  // mx.quantize of x along its last axis (RequestError where group_size does not divide it).
  QuantizedRows quantize(const mlx::core::array& x) const;

 private:
  int group_size_, bits_;
};

class QuantizedKVCache final : public QuantizedCache, public QuantizedBlockCache {
 public:
  static constexpr int kStep = 256;

  QuantizedKVCache(int group_size, int bits);
  // KVCache.to_quantized: the KVCache's whole buffers (rows past its offset included) quantized,
  // same offset. RequestError where group_size does not divide the head dimension.
  static std::unique_ptr<QuantizedKVCache> from(const KVCache& cache, int group_size, int bits);
  // A cache holding these rows ([1, H, offset, ...] each; a batch row's).
  static std::unique_ptr<QuantizedKVCache> from_rows(QuantizedRows keys, QuantizedRows values, int offset,
                                                     int group_size, int bits);
  // Its rows (the first offset()), of keys and values; Error while empty.
  std::pair<QuantizedRows, QuantizedRows> rows() const;

  std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                     const mlx::core::array& values) override;

  std::array<mlx::core::array, 6> take_for_update(int batch, int heads, int n, int dim,
                                                  mlx::core::Dtype scale_dtype) override;
  void commit_update(std::array<mlx::core::array, 6> buffers, int n, bool exclusive) override;
  bool exclusive() const override { return !shared_; }
  std::optional<mlx::core::Dtype> scale_dtype() const override {
    return keys_ ? std::optional(keys_->scales.dtype()) : std::nullopt;
  }

  int offset() const override { return offset_; }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override;
  bool is_trimmable() const override { return true; }
  int trim(int n) override;
  int size() const override { return offset_; }
  bool empty() const override { return !keys_.has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  // The buffers to evaluate, not handed out (the fused block keeps writing them in place).
  std::vector<mlx::core::array> state_to_eval() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

 private:
  void grow_for(int batch, int heads, int n, int k_dim, int v_dim, mlx::core::Dtype dtype);
  std::pair<QuantizedRows, QuantizedRows> fetch() const;

  std::optional<QuantizedRows> keys_, values_;
  int offset_ = 0;
  // The buffers were handed out (fetch, state, clone; see QuantizedBlockCache::exclusive).
  mutable bool shared_ = false;
};

// generate.py maybe_quantize_kv_cache: every plain KVCache holding at least q.start tokens is
// replaced by its QuantizedKVCache, every RotatingKVCache by its QuantizedRotatingKVCache (which
// mlx-lm lacks: its to_quantized raises). Batch caches stay as they are.
void maybe_quantize_kv_cache(LayerCaches& caches, const KvQuantization& q);

}  // namespace mlxcpp
