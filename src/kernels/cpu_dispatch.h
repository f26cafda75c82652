// How our primitives hand their work to MLX's CPU stream: allocate the output and register
// inputs and output with the stream's command encoder (so their buffers live until the work
// runs); the caller then queues the work with the returned encoder's dispatch(). (Two steps: the
// work's lambda must copy `out` after its buffer exists.)
#pragma once

#include <vector>

#include <mlx/allocator.h>
#include <mlx/array.h>
#include <mlx/backend/cpu/encoder.h>

namespace mlxcpp::kernels {

inline mlx::core::cpu::CommandEncoder& begin_unary(mlx::core::Stream s, const std::vector<mlx::core::array>& inputs,
                                                   mlx::core::array& out) {
  out.set_data(mlx::core::allocator::malloc(out.nbytes()));
  auto& enc = mlx::core::cpu::get_command_encoder(s);
  for (const auto& in : inputs) enc.set_input_array(in);
  enc.set_output_array(out);
  return enc;
}

// The same for a primitive of several outputs, whose buffers the caller allocates (some alias
// their inputs).
inline mlx::core::cpu::CommandEncoder& encoder_for(mlx::core::Stream s, const std::vector<mlx::core::array>& inputs,
                                                   std::vector<mlx::core::array>& outputs) {
  auto& enc = mlx::core::cpu::get_command_encoder(s);
  for (const auto& in : inputs) enc.set_input_array(in);
  for (auto& o : outputs) enc.set_output_array(o);
  return enc;
}

// Arrays to capture in a dispatched task: views that do not keep the graph alive (the encoder
// holds the buffers).
inline std::vector<mlx::core::array> weak_copies(const std::vector<mlx::core::array>& arrays) {
  std::vector<mlx::core::array> out;
  out.reserve(arrays.size());
  for (const auto& a : arrays) out.push_back(mlx::core::array::unsafe_weak_copy(a));
  return out;
}

}  // namespace mlxcpp::kernels
