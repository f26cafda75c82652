#include "cache/cache_ops.h"

#include <algorithm>
#include <string>

#include <mlx/ops.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp::cache_detail {

namespace {

std::string shape_str(const mx::array& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.shape().size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(a.shape(static_cast<int>(i)));
  }
  return s + ")";
}

void check_pair(std::string_view op, const mx::array& keys, const mx::array& values) {
  if (keys.ndim() != 4 || values.ndim() != 4) {
    throw Error("[" + std::string(op) + "] keys and values must be (B, n_kv_heads, S, head_dim), got " +
                shape_str(keys) + " and " + shape_str(values));
  }
  for (int ax = 0; ax < 3; ++ax) {
    if (keys.shape(ax) != values.shape(ax)) {
      throw Error("[" + std::string(op) + "] keys " + shape_str(keys) + " and values " +
                  shape_str(values) + " differ in (B, n_kv_heads, S)");
    }
  }
}

}  // namespace

mx::array int_array(const std::vector<int>& v) {
  return mx::array(v.data(), {static_cast<int>(v.size())}, mx::int32);
}

mx::array seq_slice(const mx::array& a, int start, int stop) {
  int len = a.shape(2);
  start = std::clamp(start, 0, len);
  stop = std::clamp(stop, start, len);
  mx::Shape lo{0, 0, start, 0};
  mx::Shape hi{a.shape(0), a.shape(1), stop, a.shape(3)};
  return mx::slice(a, std::move(lo), std::move(hi));
}

mx::array seq_assign(const mx::array& a, const mx::array& update, int start) {
  auto upd = update.dtype() == a.dtype() ? update : mx::astype(update, a.dtype());
  mx::Shape lo{0, 0, start, 0};
  mx::Shape hi{a.shape(0), a.shape(1), start + update.shape(2), a.shape(3)};
  return mx::slice_update(a, upd, std::move(lo), std::move(hi));
}

void append_zeros(std::optional<mx::array>& keys, std::optional<mx::array>& values, int rows, int batch, int heads,
                  int k_dim, int v_dim, mx::Dtype dtype) {
  auto new_k = mx::zeros({batch, heads, rows, k_dim}, dtype);
  auto new_v = mx::zeros({batch, heads, rows, v_dim}, dtype);
  if (keys) {
    keys = mx::concatenate({*keys, new_k}, 2);
    values = mx::concatenate({*values, new_v}, 2);
  } else {
    keys = std::move(new_k);
    values = std::move(new_v);
  }
}

int64_t buffer_bytes(const std::optional<mx::array>& keys, const std::optional<mx::array>& values) {
  if (!keys) return 0;
  return static_cast<int64_t>(keys->nbytes() + values->nbytes());
}

bool grow_buffers(std::optional<mx::array>& keys, std::optional<mx::array>& values, int prev, int n, int batch,
                  int heads, int k_dim, int v_dim, mx::Dtype dtype, int step) {
  if (keys && prev + n <= keys->shape(2)) return false;
  if (keys && prev % step != 0) {
    keys = seq_slice(*keys, 0, prev);
    values = seq_slice(*values, 0, prev);
  }
  append_zeros(keys, values, (step + n - 1) / step * step, batch, heads, k_dim, v_dim, dtype);
  return true;
}

void check_update(std::string_view op, const mx::array& keys, const mx::array& values) {
  check_pair(op, keys, values);
  if (keys.shape(2) < 1) {
    throw Error("[" + std::string(op) + "] expected at least one new token, got keys " +
                shape_str(keys));
  }
}

void check_state(std::string_view op, const mx::array& keys, const mx::array& values) {
  check_pair(op, keys, values);
}

void check_trim(std::string_view op, int n) {
  if (n < 0) throw Error("[" + std::string(op) + "] cannot trim a negative count, got " + std::to_string(n));
}

}  // namespace mlxcpp::cache_detail
