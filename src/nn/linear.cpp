#include "nn/linear.h"

#include <mlx/ops.h>

#include "kernels/microscaled.h"
#include "kernels/ops.h"
#include "kernels/qmatmul.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Fast mode, an affine matrix our kernels cover: 16-bit scales where they convert exactly, and
// where the integer kernels run, 4/5/6/8-bit layers in their kRows8 layout instead, with the
// 16-bit scales or else float32 ones (a GGUF Q4_K's are not float16 values: in MLX's layout
// Gemma 3's o_proj and down_proj took the GEMM, widening their tiles every step, in decode steps
// of more than 8 sequences). (fast_path_layout declines scales and biases of different types.)
std::optional<QuantizedWeight> fast_affine(const LoadContext& ctx, const mx::array& w, const mx::array& scales,
                                           const mx::array& biases, const QuantSpec& spec) {
  if (!kernels::qmatmul_supported(spec.bits, spec.group_size)) return std::nullopt;
  const auto kept = kernels::kernel_scales(scales, biases, *ctx.fast);
  const mx::array& s = kept ? kept->first : scales;
  const mx::array& b = kept ? kept->second : biases;
  if (auto r = kernels::fast_path_layout(w, s, b, spec.bits, spec.group_size, ctx.fast)) {
    return QuantizedWeight{(*r)[0], (*r)[1], (*r)[2], spec, ctx.fast};
  }
  if (kept) return QuantizedWeight{w, kept->first, kept->second, spec, ctx.fast};
  return std::nullopt;
}

}  // namespace

QuantizedWeight QuantizedWeight::take(const LoadContext& ctx, const std::string& path, int out, int in,
                                      const QuantSpec& spec) {
  const int packed = in * spec.bits / 32;
  const int groups = in / spec.group_size;
  mx::array w = ctx.weights.take(path + ".weight", mx::Shape{out, packed});
  mx::array scales = ctx.weights.take(path + ".scales", mx::Shape{out, groups});
  std::optional<mx::array> biases;
  if (spec.mode == "affine") biases = ctx.weights.take(path + ".biases", mx::Shape{out, groups});
  if (ctx.fast && biases) {
    if (auto q = fast_affine(ctx, w, scales, *biases, spec)) return *q;
  }
  // Fast mode, mxfp4: the same values as an affine 5-bit matrix (kernels/microscaled.h).
  if (ctx.fast && spec.mode == "mxfp4" && spec.bits == 4 && spec.group_size == 32) {
    if (auto a = kernels::mxfp4_as_affine(w, scales, 5)) {
      if (auto q = fast_affine(ctx, (*a)[0], (*a)[1], (*a)[2], QuantSpec{32, 5, "affine"})) return *q;
    }
  }
  // mx/fp modes keep uint8 scales; only floating scales follow the activation dtype.
  scales = ctx.cast(scales);
  if (biases) biases = ctx.cast(*biases);
  return QuantizedWeight{w, scales, biases, spec, ctx.fast};
}

mx::array QuantizedWeight::matmul_t(const mx::array& x) const {
  return kernels::quantized_matmul_t(x, weight, scales, biases, spec.group_size, spec.bits, spec.mode, fast);
}

void QuantizedWeight::collect(std::vector<mx::array>& out) const {
  out.push_back(weight);
  out.push_back(scales);
  if (biases) out.push_back(*biases);
}

std::optional<kernels::BlockLinear> Linear::block_view() const {
  if (!q_ || q_->spec.mode != "affine" || !q_->biases) return std::nullopt;
  return kernels::BlockLinear{q_->weight, q_->scales, *q_->biases, bias_, q_->spec.bits, q_->spec.group_size};
}

void Linear::collect(std::vector<mx::array>& out) const {
  if (weight_) out.push_back(*weight_);
  if (q_) q_->collect(out);
  if (bias_) out.push_back(*bias_);
}

Linear Linear::load(const LoadContext& ctx, const std::string& path, int in_dims, int out_dims, bool bias) {
  Linear l;
  if (auto spec = ctx.quant.for_layer(path, in_dims, ctx.weights)) {
    l.q_ = QuantizedWeight::take(ctx, path, out_dims, in_dims, *spec);
  } else {
    l.weight_ = ctx.take(path + ".weight", mx::Shape{out_dims, in_dims});
  }
  if (bias) l.bias_ = ctx.take(path + ".bias", mx::Shape{out_dims});
  return l;
}

mx::array Linear::operator()(const mx::array& x) const {
  if (q_) {
    auto y = q_->matmul_t(x);
    return bias_ ? mx::add(y, *bias_) : y;
  }
  // nn.Linear: addmm(bias, x, W.T) with a bias, else x @ W.T.
  if (bias_) return mx::addmm(*bias_, x, mx::transpose(*weight_));
  return mx::matmul(x, mx::transpose(*weight_));
}

}  // namespace mlxcpp
