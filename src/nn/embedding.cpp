#include "nn/embedding.h"

#include <mlx/ops.h>

#include "kernels/ops.h"

namespace mx = mlx::core;

namespace mlxcpp {

Embedding Embedding::load(const LoadContext& ctx, const std::string& path, int num_embeddings, int dims) {
  Embedding e;
  if (auto spec = ctx.quant.for_layer(path, dims, ctx.weights)) {
    e.q_ = QuantizedWeight::take(ctx, path, num_embeddings, dims, *spec);
  } else {
    e.weight_ = ctx.take(path + ".weight", mx::Shape{num_embeddings, dims});
  }
  return e;
}

mx::array Embedding::operator()(const mx::array& ids) const {
  if (!q_) return mx::take(*weight_, ids, 0);
  if (auto rows = kernels::quantized_take(q_->weight, q_->scales, q_->biases, ids, q_->spec.group_size, q_->spec.bits,
                                          q_->spec.mode, q_->fast)) {
    return *rows;
  }
  // (quantized_take refuses kRows8 weights off the fast path with an error.)
  // Fast mode may keep 16-bit scales for our kernels; rows are dequantized in float32 then.
  auto f32 = [&](mx::array a) { const bool half = a.dtype() == mx::float16 || a.dtype() == mx::bfloat16;
    return q_->fast && half ? mx::astype(a, mx::float32) : a; };
  std::optional<mx::array> biases;
  if (q_->biases) biases = f32(mx::take(*q_->biases, ids, 0));
  return mx::dequantize(mx::take(q_->weight, ids, 0), f32(mx::take(q_->scales, ids, 0)), biases,
                        q_->spec.group_size, q_->spec.bits, q_->spec.mode);
}

void Embedding::collect(std::vector<mx::array>& out) const {
  if (weight_) out.push_back(*weight_);
  if (q_) q_->collect(out);
}

mx::array Embedding::as_linear(const mx::array& x) const {
  if (q_) return q_->matmul_t(x);
  return mx::matmul(x, mx::transpose(*weight_));
}

}  // namespace mlxcpp
