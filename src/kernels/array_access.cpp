#include "kernels/array_access.h"

#include <algorithm>
#include <cstring>

#include <mlx/types/bf16.h>
#include <mlx/types/half_types.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

template <class T>
long row_index(const mx::array& ids, size_t i, long rows) {
  long loc = 0;
  for (int ax = ids.ndim() - 1; ax >= 0; --ax) {
    loc += static_cast<long>(i % ids.shape(ax)) * ids.strides()[ax];
    i /= ids.shape(ax);
  }
  long id = static_cast<long>(ids.data<T>()[loc]);
  if (id < 0) id += rows;               // take's negative indices
  return std::clamp(id, 0L, rows - 1);  // never read outside the table
}

}  // namespace

long row_index_any(const mx::array& ids, size_t i, long rows) {
  switch (ids.dtype()) {
    case mx::int32: return row_index<int32_t>(ids, i, rows);
    case mx::uint32: return row_index<uint32_t>(ids, i, rows);
    case mx::int64: return row_index<int64_t>(ids, i, rows);
    default: return row_index<uint64_t>(ids, i, rows);
  }
}

bool is_contiguous_f32(const mx::array& a) { return a.dtype() == mx::float32 && a.flags().row_contiguous; }

namespace {

// a's elements in row-major order, converted to O.
template <class T, class O = float>
void gather(const mx::array& a, O* out) {
  const T* src = a.data<T>();
  const int nd = a.ndim();
  if (nd == 0) {
    out[0] = static_cast<O>(src[0]);
    return;
  }
  const auto& shape = a.shape();
  const auto& strides = a.strides();
  std::vector<int> idx(nd, 0);
  const size_t n = a.size();
  const int last = shape[nd - 1];
  const int64_t last_stride = strides[nd - 1];
  int64_t base = 0;
  for (size_t done = 0; done < n; done += last) {
    for (int j = 0; j < last; ++j) *out++ = static_cast<O>(src[base + j * last_stride]);
    // Advance the outer index (odometer) and its offset.
    for (int d = nd - 2; d >= 0; --d) {
      base += strides[d];
      if (++idx[d] < shape[d]) break;
      base -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

const float* contiguous_f32(const mx::array& a, std::vector<float>& scratch) {
  if (is_contiguous_f32(a)) return a.data<float>();
  scratch.resize(a.size());
  switch (a.dtype()) {
    case mx::float32: gather<float>(a, scratch.data()); break;
    case mx::float16: gather<mx::float16_t>(a, scratch.data()); break;
    case mx::bfloat16: gather<mx::bfloat16_t>(a, scratch.data()); break;
    default: throw Error("[kernels] expected a floating array");
  }
  return scratch.data();
}

void copy_contiguous(const mx::array& a, void* out) {
  if (a.flags().row_contiguous) {
    std::memcpy(out, a.data<void>(), a.nbytes());
    return;
  }
  switch (a.dtype()) {
    case mx::float32: gather<float, float>(a, static_cast<float*>(out)); break;
    case mx::float16: gather<mx::float16_t, mx::float16_t>(a, static_cast<mx::float16_t*>(out)); break;
    case mx::bfloat16: gather<mx::bfloat16_t, mx::bfloat16_t>(a, static_cast<mx::bfloat16_t*>(out)); break;
    case mx::uint32: gather<uint32_t, uint32_t>(a, static_cast<uint32_t*>(out)); break;  // packed rows
    default: throw Error("[kernels] expected a floating or packed uint32 array");
  }
}

std::optional<ScaleType> scale_type(mx::Dtype d) {
  if (d == mx::float32) return ScaleType::kF32;
  if (d == mx::float16) return ScaleType::kF16;
  if (d == mx::bfloat16) return ScaleType::kBF16;
  return std::nullopt;
}

ScalePair scale_pair(const mx::array& s, const mx::array& b, std::vector<float>& s_scratch,
                     std::vector<float>& b_scratch) {
  const auto st = scale_type(s.dtype());
  if (st && s.dtype() == b.dtype() && s.flags().row_contiguous && b.flags().row_contiguous) {
    return {s.data<void>(), b.data<void>(), *st};
  }
  return {contiguous_f32(s, s_scratch), contiguous_f32(b, b_scratch), ScaleType::kF32};
}

int quantized_k(const mx::array& w, const mx::array& scales, const mx::array& biases, int bits, int group) {
  if (is_rows8(w, scales)) return rows8_k(w.shape(1), bits, group, *scale_type(scales.dtype()), is_rows8_sym(w, scales, biases));
  return static_cast<int>(static_cast<long>(w.shape(1)) * 32 / bits);
}

QMatrixView quantized_view(const mx::array& w, const mx::array& scales, const mx::array& biases, int bits, int group) {
  const int n = w.shape(0), k = quantized_k(w, scales, biases, bits, group);
  const ScaleType st = *scale_type(scales.dtype());
  if (is_rows8(w, scales)) {
    return {w.data<uint32_t>(), nullptr, nullptr, n, k, bits, group, st, QLayout::kRows8, is_rows8_sym(w, scales, biases)};
  }
  return {w.data<uint32_t>(), scales.data<void>(), biases.data<void>(), n, k, bits, group, st};
}

}  // namespace mlxcpp::kernels
