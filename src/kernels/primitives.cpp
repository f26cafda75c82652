#include "kernels/primitives.h"

#include <algorithm>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/block_kernels.h"
#include "kernels/cpu_dispatch.h"
#include "kernels/qmatmul.h"
#include "kernels/vec_ops.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

void QuantizedMatmulPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), x = mx::array::unsafe_weak_copy(inputs[0]),
                w = mx::array::unsafe_weak_copy(inputs[1]), s = mx::array::unsafe_weak_copy(inputs[2]),
                b = mx::array::unsafe_weak_copy(inputs[3]), ctx = ctx_, bits = bits_, group = group_]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> xs, ss, bs;
    const int k = x.shape(-1);
    const int n = w.shape(0);
    const ScalePair sb = scale_pair(s, b, ss, bs);
    QMatrixView q{w.data<uint32_t>(), sb.scales, sb.biases, n, k, bits, group, sb.type};
    const int m = static_cast<int>(x.size() / k);
    qmatmul(*ctx, contiguous_f32(x, xs), m, q, out.data<float>());
  });
}

void QuantizedMatmulPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppQuantizedMatmul] CPU-only primitive built for a GPU stream");
}

bool QuantizedMatmulPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const QuantizedMatmulPrimitive*>(&other);
  return o && o->bits_ == bits_ && o->group_ == group_ && o->ctx_ == ctx_;
}

std::vector<mx::Shape> QuantizedMatmulPrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.back() = inputs[1].shape(0);
  return {shape};
}

void RmsNormPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), x = mx::array::unsafe_weak_copy(inputs[0]),
                w = mx::array::unsafe_weak_copy(inputs[1]), ctx = ctx_, eps = eps_]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> xs;
    const int d = x.shape(-1);
    rms_norm_rows(vec_ops(ctx->isa()), contiguous_f32(x, xs), w.data<float>(), eps, static_cast<int>(x.size() / d), d,
                  out.data<float>());
  });
}

void RmsNormPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppRmsNorm] CPU-only primitive built for a GPU stream");
}

bool RmsNormPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const RmsNormPrimitive*>(&other);
  return o && o->eps_ == eps_ && o->ctx_ == ctx_;
}

void LogSoftmaxPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), x = mx::array::unsafe_weak_copy(inputs[0]),
                ctx = ctx_]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> xs;
    const long n = x.shape(-1);
    log_softmax_rows(*ctx, contiguous_f32(x, xs), static_cast<int>(x.size() / n), n, out.data<float>());
  });
}

void LogSoftmaxPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppLogSoftmax] CPU-only primitive built for a GPU stream");
}

bool LogSoftmaxPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const LogSoftmaxPrimitive*>(&other);
  return o && o->ctx_ == ctx_;
}

namespace {

// Element i (row-major order) of `ids`, whatever its strides, as a row of a table of `rows`.
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

void QuantizedTakePrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), ids = mx::array::unsafe_weak_copy(inputs[0]),
                w = mx::array::unsafe_weak_copy(inputs[1]), s = mx::array::unsafe_weak_copy(inputs[2]),
                b = mx::array::unsafe_weak_copy(inputs[3]), bits = bits_, group = group_]() mutable {
    const int d = out.shape(-1);
    const long rows = w.shape(0);
    const QMatrixView table{w.data<uint32_t>(), s.data<void>(), b.data<void>(), static_cast<int>(rows), d, bits, group,
                            *scale_type(s.dtype())};
    for (size_t i = 0; i < ids.size(); ++i) {
      long r = 0;
      switch (ids.dtype()) {
        case mx::int32: r = row_index<int32_t>(ids, i, rows); break;
        case mx::uint32: r = row_index<uint32_t>(ids, i, rows); break;
        case mx::int64: r = row_index<int64_t>(ids, i, rows); break;
        default: r = row_index<uint64_t>(ids, i, rows); break;
      }
      dequantize_row(table, r, out.data<float>() + i * d);
    }
  });
}

void QuantizedTakePrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppQuantizedTake] CPU-only primitive built for a GPU stream");
}

bool QuantizedTakePrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const QuantizedTakePrimitive*>(&other);
  return o && o->bits_ == bits_ && o->group_ == group_;
}

std::vector<mx::Shape> QuantizedTakePrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.push_back(static_cast<int>(inputs[1].shape(1) * 32 / bits_));
  return {shape};
}

}  // namespace mlxcpp::kernels
