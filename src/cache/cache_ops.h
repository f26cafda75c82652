// Internal helpers shared by the cache implementations (not part of the public API).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp::cache_detail {

// A host vector as an int32 array (mlx's mx.array(list_of_ints)).
mlx::core::array int_array(const std::vector<int>& v);
// a[..., start:stop, :] for a (B, H, S, D) array (Python slice bounds, clamped).
mlx::core::array seq_slice(const mlx::core::array& a, int start, int stop);
// a[..., start:start + update.shape[2], :] = update (cast to a's dtype, like Python setitem).
mlx::core::array seq_assign(const mlx::core::array& a, const mlx::core::array& update, int start);
// keys/values with `rows` zero rows appended along the sequence axis (made of zeros while absent).
void append_zeros(std::optional<mlx::core::array>& keys, std::optional<mlx::core::array>& values, int rows, int batch,
                  int heads, int k_dim, int v_dim, mlx::core::Dtype dtype);
// Bytes of a cache's key and value buffers (0 while absent).
int64_t buffer_bytes(const std::optional<mlx::core::array>& keys, const std::optional<mlx::core::array>& values);
// cache.py's growth of KVCache / BatchKVCache buffers for n more rows after `prev` used rows:
// nothing while they fit, else the used rows (sliced at prev unless prev is a multiple of step)
// with zeros for ceil(n / step) * step more rows appended. Returns whether it grew.
bool grow_buffers(std::optional<mlx::core::array>& keys, std::optional<mlx::core::array>& values, int prev, int n,
                  int batch, int heads, int k_dim, int v_dim, mlx::core::Dtype dtype, int step);
// Throws Error unless keys/values are rank 4 with equal (B, H, S) and S >= 1.
void check_update(std::string_view op, const mlx::core::array& keys, const mlx::core::array& values);
// Throws Error unless keys/values are a rank-4 pair with equal (B, H, S).
void check_state(std::string_view op, const mlx::core::array& keys, const mlx::core::array& values);
// Throws Error for n < 0.
void check_trim(std::string_view op, int n);

}  // namespace mlxcpp::cache_detail
