// Internal helpers shared by the cache implementations (not part of the public API).
#pragma once

#include <string_view>

#include <mlx/array.h>

namespace mlxcpp::cache_detail {

// a[..., start:stop, :] for a (B, H, S, D) array (Python slice bounds, clamped).
mlx::core::array seq_slice(const mlx::core::array& a, int start, int stop);
// a[..., start:start + update.shape[2], :] = update (cast to a's dtype, like Python setitem).
mlx::core::array seq_assign(const mlx::core::array& a, const mlx::core::array& update, int start);
// Throws Error unless keys/values are rank 4 with equal (B, H, S) and S >= 1.
void check_update(std::string_view op, const mlx::core::array& keys, const mlx::core::array& values);
// Throws Error unless keys/values are a rank-4 pair with equal (B, H, S).
void check_state(std::string_view op, const mlx::core::array& keys, const mlx::core::array& values);
// Throws Error for n < 0.
void check_trim(std::string_view op, int n);

}  // namespace mlxcpp::cache_detail
