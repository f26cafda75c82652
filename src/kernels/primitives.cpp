#include "kernels/primitives.h"

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/qmatmul.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

void QuantizedMatmulPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (const auto& in : inputs) enc.set_input_array(in);
  enc.set_output_array(out);
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

}  // namespace mlxcpp::kernels
