#include "kernels/primitives.h"

#include <algorithm>
#include <limits>

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
    QMatrixView q;
    if (is_rows8(w, s)) {
      q = quantized_view(w, s, b, bits, group);
    } else {
      const ScalePair sb = scale_pair(s, b, ss, bs);
      q = QMatrixView{w.data<uint32_t>(), sb.scales, sb.biases, n, k, bits, group, sb.type};
    }
    const int m = static_cast<int>(x.size() / k);
    // [B, 1, k]: one token per sequence (a batched decode step's logits).
    const bool decode = x.ndim() >= 2 && x.shape(-2) == 1;
    qmatmul(*ctx, contiguous_f32(x, xs), m, q, out.data<float>(), decode);
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

namespace {

// A row-wise kernel over x's last axis (rows of n floats) on the CPU stream: fn(ctx, x, rows, n, out).
template <class T, class Fn>
void eval_rows(mx::Stream stream, const std::vector<mx::array>& inputs, mx::array& out,
               const std::shared_ptr<const KernelContext>& ctx, Fn fn) {
  auto& enc = begin_unary(stream, inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), x = mx::array::unsafe_weak_copy(inputs[0]), ctx, fn]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> xs;
    const long n = x.shape(-1);
    fn(*ctx, contiguous_f32(x, xs), static_cast<int>(x.size() / n), n, out.data<T>());
  });
}

}  // namespace

void LogSoftmaxPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  eval_rows<float>(stream(), inputs, out, ctx_, log_softmax_rows);
}

void LogSoftmaxPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppLogSoftmax] CPU-only primitive built for a GPU stream");
}

bool LogSoftmaxPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const LogSoftmaxPrimitive*>(&other);
  return o && o->ctx_ == ctx_;
}

void TokenMaskPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), x = mx::array::unsafe_weak_copy(inputs[0]),
                words = mx::array::unsafe_weak_copy(inputs[1])]() mutable {
    std::vector<float> xs;
    const float* in = contiguous_f32(x, xs);
    const long n = x.shape(-1), w = words.shape(-1), rows = static_cast<long>(x.size() / n);
    const uint32_t* bits = words.data<uint32_t>();
    float* o = out.data<float>();
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (long r = 0; r < rows; ++r) {
      const float* xr = in + r * n;
      float* orow = o + r * n;
      const uint32_t* wr = bits + r * w;
      for (long i = 0; i < n; i += 32) {
        const uint32_t word = wr[i / 32];
        const long m = std::min<long>(32, n - i);
        if (word == ~0u) {
          std::copy_n(xr + i, m, orow + i);
        } else if (word == 0u) {
          std::fill_n(orow + i, m, kNegInf);
        } else {
          for (long j = 0; j < m; ++j) orow[i + j] = (word >> j) & 1u ? xr[i + j] : kNegInf;
        }
      }
    }
  });
}

void TokenMaskPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppTokenMask] CPU-only primitive built for a GPU stream");
}

void ArgmaxPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  eval_rows<uint32_t>(stream(), inputs, out, ctx_, argmax_rows);
}

void ArgmaxPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppArgmax] CPU-only primitive built for a GPU stream");
}

bool ArgmaxPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const ArgmaxPrimitive*>(&other);
  return o && o->ctx_ == ctx_;
}


void QuantizedTakePrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), ids = mx::array::unsafe_weak_copy(inputs[0]),
                w = mx::array::unsafe_weak_copy(inputs[1]), s = mx::array::unsafe_weak_copy(inputs[2]),
                b = mx::array::unsafe_weak_copy(inputs[3]), bits = bits_, group = group_]() mutable {
    const int d = out.shape(-1);
    const long rows = w.shape(0);
    const QMatrixView table = quantized_view(w, s, b, bits, group);
    for (size_t i = 0; i < ids.size(); ++i) dequantize_row(table, row_index_any(ids, i, rows), out.data<float>() + i * d);
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
  shape.push_back(quantized_k(inputs[1], inputs[2], inputs[3], bits_, group_));
  return {shape};
}

void GatherQmmPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  std::vector<mx::array> in;
  for (const auto& a : inputs) in.push_back(mx::array::unsafe_weak_copy(a));
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), in = std::move(in), ctx = ctx_, bits = bits_,
                group = group_]() mutable {
    KernelContext::Timer timer(*ctx);
    const auto &x = in[0], &w = in[1], &lhs = in[4], &rhs = in[5];
    const int k = x.shape(-1), m = x.shape(-2), n = w.shape(-2);
    const long xrows = static_cast<long>(m) * k, orows = static_cast<long>(m) * n;
    const long xbatch = static_cast<long>(x.size()) / xrows, experts = static_cast<long>(w.size()) / n / w.shape(-1);
    std::vector<float> xs, ss, bs;
    const float* xf = contiguous_f32(x, xs);
    const ScalePair sb = scale_pair(in[2], in[3], ss, bs);
    const long wstride = static_cast<long>(n) * w.shape(-1);
    const long sstride = static_cast<long>(n) * (k / group) * (sb.type == ScaleType::kF32 ? 4 : 2);
    // The pairs in expert order; each expert's x rows gathered into one product.
    const size_t count = lhs.size();
    std::vector<long> li(count), ri(count);
    std::vector<size_t> order(count);
    for (size_t i = 0; i < count; ++i) {
      li[i] = row_index_any(lhs, i, xbatch);
      ri[i] = row_index_any(rhs, i, experts);
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ri[a] < ri[b]; });
    std::vector<float> xg(count * xrows), og(count * orows);
    std::vector<QJob> jobs;
    for (size_t at = 0, end = 0; at < count; at = end) {
      const long e = ri[order[at]];
      for (end = at; end < count && ri[order[end]] == e; ++end)
        std::copy_n(xf + li[order[end]] * xrows, xrows, xg.data() + end * xrows);
      const auto* sp = static_cast<const char*>(sb.scales) + e * sstride;
      const auto* bp = static_cast<const char*>(sb.biases) + e * sstride;
      jobs.push_back(QJob{QMatrixView{w.data<uint32_t>() + e * wstride, sp, bp, n, k, bits, group, sb.type},
                          xg.data() + at * xrows, static_cast<int>((end - at) * m), og.data() + at * orows});
    }
    qmatmul_many(*ctx, jobs.data(), static_cast<int>(jobs.size()));
    for (size_t p = 0; p < count; ++p) std::copy_n(og.data() + p * orows, orows, out.data<float>() + order[p] * orows);
  });
}

void GatherQmmPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppGatherQmm] CPU-only primitive built for a GPU stream");
}

bool GatherQmmPrimitive::is_equivalent(const mx::Primitive& other) const {
  const auto* o = dynamic_cast<const GatherQmmPrimitive*>(&other);
  return o && o->bits_ == bits_ && o->group_ == group_ && o->ctx_ == ctx_;
}

std::vector<mx::Shape> GatherQmmPrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[4].shape();
  shape.push_back(inputs[0].shape(-2));
  shape.push_back(inputs[1].shape(-2));
  return {shape};
}

}  // namespace mlxcpp::kernels
