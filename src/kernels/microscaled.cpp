#include "kernels/microscaled.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <mlx/ops.h>
#include <mlx/transforms.h>

namespace mx = mlx::core;

namespace mlxcpp::kernels {

std::optional<std::array<mx::array, 3>> mxfp4_as_affine(const mx::array& w_in, const mx::array& s_in, int bits) {
  if (bits != 5 && bits != 8) return std::nullopt;
  if (w_in.ndim() != 2 || s_in.ndim() != 2 || w_in.dtype() != mx::uint32 || s_in.dtype() != mx::uint8 ||
      w_in.shape(0) != s_in.shape(0) || static_cast<long>(w_in.shape(1)) * 8 != static_cast<long>(s_in.shape(1)) * 32) {
    return std::nullopt;
  }
  auto w = mx::contiguous(w_in), s = mx::contiguous(s_in);
  mx::eval({w, s});
  const int n = w.shape(0), words = w.shape(1), groups = s.shape(1), k = words * 8;
  // Twice the e2m1 values (sign bit 3, then the magnitude code): integers in [-12, 12].
  constexpr int kTwice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  const int out_words = k * bits / 32, zero = 1 << (bits - 1);
  std::vector<uint32_t> out(static_cast<size_t>(n) * out_words);
  std::vector<float> scales(static_cast<size_t>(n) * groups), biases(scales.size());
  const uint32_t* src = w.data<uint32_t>();
  const uint8_t* e = s.data<uint8_t>();
  for (long r = 0; r < n; ++r) {
    for (int i = 0; i < k; ++i) {
      const unsigned nib = (src[r * words + i / 8] >> (4 * (i % 8))) & 0xf;
      const int twice = (nib & 8) ? -kTwice[nib & 7] : kTwice[nib & 7];
      // MLX's packing: element i at bits [i * bits, (i + 1) * bits) of the row, little-endian.
      const uint64_t code = static_cast<uint64_t>(twice + zero), bit = static_cast<uint64_t>(i) * bits;
      uint32_t* row = out.data() + r * out_words;
      row[bit / 32] |= static_cast<uint32_t>(code << (bit % 32));
      if (bit % 32 + bits > 32) row[bit / 32 + 1] |= static_cast<uint32_t>(code >> (32 - bit % 32));
    }
    for (int g = 0; g < groups; ++g) {
      const long at = r * groups + g;
      // e8m0: 2^(e - 127) (255: NaN); halved for the doubled values.
      const float scale = e[at] == 255 ? NAN : std::ldexp(1.0f, static_cast<int>(e[at]) - 128);
      scales[at] = scale;
      biases[at] = -static_cast<float>(zero) * scale;
    }
  }
  return std::array<mx::array, 3>{mx::array(out.data(), {n, out_words}, mx::uint32),
                                  mx::array(scales.data(), {n, groups}, mx::float32),
                                  mx::array(biases.data(), {n, groups}, mx::float32)};
}

}  // namespace mlxcpp::kernels
