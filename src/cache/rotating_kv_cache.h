// Port of mlx_lm/models/cache.py RotatingKVCache: a bounded cache for sliding-window attention
// (or --max-kv-size). The first `keep` tokens are never evicted; the rest form a ring buffer of
// max_size - keep rows. Multi-token updates re-linearize the buffer and grow it to
// max_size + S - 1 rows so every new query still sees max_size keys.
#pragma once

#include <optional>

#include "cache/kv_cache.h"

namespace mlxcpp {

class RotatingKVCache final : public KVCacheBase {
 public:
  static constexpr int kStep = 256;

  // Throws ConfigError unless max_size >= 1 and 0 <= keep < max_size.
  explicit RotatingKVCache(int max_size, int keep = 0);

  // One token: written in place into the ring (_update_in_place); more: concatenated after
  // putting the buffer in temporal order (_update_concat).
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(
      const mlx::core::array& keys, const mlx::core::array& values) override;
  // The buffers' first offset() rows (the whole buffers once offset() reaches their length),
  // in buffer order, not temporal order. Throws Error while empty.
  std::pair<mlx::core::array, mlx::core::array> keys_and_values() const;

  int offset() const override { return offset_; }
  AttentionMask make_mask(
      int n, std::optional<int> window_size = std::nullopt, bool return_array = false) const override;
  // Only before anything was evicted (offset < max_size).
  bool is_trimmable() const override { return offset_ < max_size_; }
  int trim(int n) override;
  int size() const override;
  bool empty() const override { return !keys_.has_value(); }
  int64_t nbytes() const override;
  std::vector<mlx::core::array> state() const override;
  std::unique_ptr<KVCacheBase> clone() const override;

  int max_size() const { return max_size_; }
  int keep() const { return keep_; }
  // Next write position in the buffer (cache.py's _idx).
  int idx() const { return idx_; }
  // The buffers in temporal order (cache.py's _temporal_order(keys), _temporal_order(values)),
  // what BatchRotatingKVCache::merge takes. Throws Error while empty.
  std::pair<mlx::core::array, mlx::core::array> temporal_keys_values() const;

  // cache.py's state setter (keys, values, offset, keep, max_size, _idx).
  void set_state(
      mlx::core::array keys, mlx::core::array values, int offset, int keep, int max_size, int idx);

 private:
  mlx::core::array trim_rows(int trim_size, const mlx::core::array& v) const;
  mlx::core::array trim_rows(int trim_size, const mlx::core::array& v, const mlx::core::array& append) const;
  mlx::core::array temporal_order(const mlx::core::array& v) const;
  std::pair<mlx::core::array, mlx::core::array> update_concat(
      const mlx::core::array& keys, const mlx::core::array& values);
  std::pair<mlx::core::array, mlx::core::array> update_in_place(
      const mlx::core::array& keys, const mlx::core::array& values);

  int keep_;
  int max_size_;
  std::optional<mlx::core::array> keys_;
  std::optional<mlx::core::array> values_;
  int offset_ = 0;
  int idx_ = 0;
};

}  // namespace mlxcpp
