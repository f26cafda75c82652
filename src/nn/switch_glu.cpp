#include "nn/switch_glu.h"

#include <mlx/ops.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "nn/geglu.h"
#include "nn/mlp.h"

namespace mx = mlx::core;

namespace mlxcpp {

SwitchLinear SwitchLinear::load(const LoadContext& ctx, const std::string& path, int in_dims, int out_dims,
                                int experts) {
  SwitchLinear l;
  l.experts_ = experts;
  l.out_ = out_dims;
  auto spec = ctx.quant.for_layer(path, in_dims, ctx.weights);
  if (!spec) {
    l.weight_ = ctx.take(path + ".weight", mx::Shape{experts, out_dims, in_dims});
    return l;
  }
  l.spec_ = *spec;
  const int packed = in_dims * spec->bits / 32, groups = in_dims / spec->group_size;
  auto w = ctx.weights.take(path + ".weight", mx::Shape{experts, out_dims, packed});
  auto s = ctx.weights.take(path + ".scales", mx::Shape{experts, out_dims, groups});
  std::optional<mx::array> b;
  if (spec->mode == "affine") b = ctx.weights.take(path + ".biases", mx::Shape{experts, out_dims, groups});
  if (ctx.fast && b) {
    if (auto r = kernels::experts_layout(w, s, *b, spec->bits, spec->group_size, ctx.fast)) {
      l.qweight_ = (*r)[0];
      l.scales_ = (*r)[1];
      l.biases_ = (*r)[2];
      return l;
    }
  }
  // mx/fp modes keep uint8 scales; only floating scales follow the activation dtype.
  l.qweight_ = w;
  l.scales_ = ctx.cast(s);
  if (b) l.biases_ = ctx.cast(*b);
  return l;
}

mx::array SwitchLinear::operator()(const mx::array& x, const mx::array& idx, bool sorted) const {
  if (flat()) {
    // The fast path's [E * out, ...] form: MLX's layout reshapes back for stock MLX (16-bit
    // scales cast to x's type, as quantized_matmul_t does); kRows8 has no stock kernel.
    if (kernels::is_rows8(*qweight_, *scales_)) throw Error(kernels::kRows8Stock);
    auto stacked = [&](const mx::array& a) { return mx::reshape(a, {experts_, out_, a.shape(1)}); };
    return mx::gather_qmm(x, stacked(*qweight_), mx::astype(stacked(*scales_), x.dtype()),
                          mx::astype(stacked(*biases_), x.dtype()), std::nullopt, idx, true, spec_.group_size,
                          spec_.bits, spec_.mode, std::nullopt, sorted);
  }
  if (weight_) return mx::gather_mm(x, mx::swapaxes(*weight_, -1, -2), std::nullopt, idx, sorted);
  return mx::gather_qmm(x, *qweight_, *scales_, biases_, std::nullopt, idx, true, spec_.group_size, spec_.bits,
                        spec_.mode, std::nullopt, sorted);
}

std::optional<kernels::ExpertsLinear> SwitchLinear::experts_view() const {
  if (!flat()) return std::nullopt;
  const int k = kernels::quantized_k(*qweight_, *scales_, *biases_, spec_.bits, spec_.group_size);
  return kernels::ExpertsLinear{*qweight_, *scales_, *biases_, experts_, out_, k, spec_.bits, spec_.group_size};
}

void SwitchLinear::collect(std::vector<mx::array>& out) const {
  for (const auto* a : {&weight_, &qweight_, &scales_, &biases_}) {
    if (*a) out.push_back(**a);
  }
}

SwitchGLU SwitchGLU::load(const LoadContext& ctx, const std::string& path, int dims, int hidden, int experts,
                          kernels::GluActivation act) {
  return SwitchGLU(SwitchLinear::load(ctx, path + ".gate_proj", dims, hidden, experts),
                   SwitchLinear::load(ctx, path + ".up_proj", dims, hidden, experts),
                   SwitchLinear::load(ctx, path + ".down_proj", hidden, dims, experts), act);
}

mx::array SwitchGLU::operator()(const mx::array& x_in, const mx::array& indices) const {
  auto x = mx::expand_dims(x_in, {-2, -3});
  // "When we have many tokens, then sort them to make sure that the access of different
  // experts is in order." (_gather_sort / _scatter_unsort)
  const bool do_sort = indices.size() >= 64;
  auto idx = indices;
  std::optional<mx::array> inv_order;
  if (do_sort) {
    const int m = indices.shape(-1);
    auto flat = mx::flatten(indices);
    auto order = mx::argsort(flat);
    inv_order = mx::argsort(order);
    x = mx::take(mx::flatten(x, 0, -3), mx::floor_divide(order, mx::array(m, order.dtype())), 0);
    idx = mx::take(flat, order, 0);
  }
  auto up = up_(x, idx, do_sort);
  auto gate = gate_(x, idx, do_sort);
  auto out = down_(act_ == kernels::GluActivation::kGeluApprox ? geglu(gate, up) : swiglu(gate, up), idx, do_sort);
  if (do_sort) out = mx::unflatten(mx::take(out, *inv_order, 0), 0, indices.shape());
  return mx::squeeze(out, -2);
}

std::optional<mx::array> SwitchGLU::weighted(const mx::array& x, const mx::array& indices, const mx::array& scores,
                                             const kernels::FastPath& fast) const {
  auto g = gate_.experts_view(), u = up_.experts_view(), d = down_.experts_view();
  if (!g || !u || !d) return std::nullopt;
  return kernels::moe_glu(x, indices, scores, *g, *u, *d, fast, act_);
}

void SwitchGLU::collect(std::vector<mx::array>& out) const {
  gate_.collect(out);
  up_.collect(out);
  down_.collect(out);
}

}  // namespace mlxcpp
