#include "nn/per_layer_inputs.h"

#include <cmath>

#include <mlx/ops.h>

namespace mx = mlx::core;

namespace mlxcpp {

namespace {
// A Python float operand of an array op: a scalar of the array's dtype.
mx::array scalar(double v, mx::Dtype d) { return mx::array(static_cast<float>(v), d); }
}  // namespace

PerLayerInputs::PerLayerInputs(int layers, int dim, int hidden, Embedding e, Linear p, RMSNorm n)
    : layers_(layers),
      dim_(dim),
      embed_(std::move(e)),
      proj_(std::move(p)),
      norm_(std::move(n)),
      embed_scale_(std::pow(static_cast<double>(dim), 0.5)),
      proj_scale_(std::pow(static_cast<double>(hidden), -0.5)) {}

PerLayerInputs PerLayerInputs::load(const LoadContext& ctx, const std::string& path, int vocab, int layers, int dim,
                                    int hidden, float eps) {
  return PerLayerInputs(layers, dim, hidden,
                        Embedding::load(ctx, path + ".embed_tokens_per_layer", vocab, layers * dim),
                        Linear::load(ctx, path + ".per_layer_model_projection", hidden, layers * dim, false),
                        RMSNorm::load(ctx, path + ".per_layer_projection_norm", dim, eps));
}

mx::array PerLayerInputs::operator()(const mx::array& ids, const mx::array& h) const {
  auto e = embed_(ids);
  e = mx::unflatten(mx::multiply(e, scalar(embed_scale_, e.dtype())), -1, {layers_, dim_});
  auto p = proj_(h);
  p = norm_(mx::unflatten(mx::multiply(p, scalar(proj_scale_, p.dtype())), -1, {layers_, dim_}));
  auto sum = mx::add(p, e);
  return mx::multiply(sum, scalar(std::pow(2.0, -0.5), sum.dtype()));  // per_layer_input_scale
}

mx::array PerLayerInputs::layer(const mx::array& all, int i) {
  const int B = all.shape(0), L = all.shape(1), P = all.shape(3);
  return mx::reshape(mx::slice(all, {0, 0, i, 0}, {B, L, i + 1, P}), {B, L, P});
}

void PerLayerInputs::collect(std::vector<mx::array>& out) const {
  embed_.collect(out);
  proj_.collect(out);
  norm_.collect(out);
}

}  // namespace mlxcpp
