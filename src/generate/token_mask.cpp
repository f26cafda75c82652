#include "generate/token_mask.h"

#include <limits>

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

mx::array apply_token_mask(const mx::array& logits, const std::vector<uint32_t>& words) {
  const int vocab = logits.shape(-1);
  if (words.size() * 32 < static_cast<size_t>(vocab)) {
    throw Error("[token_mask] a mask of " + std::to_string(words.size() * 32) + " tokens for logits of " +
                std::to_string(vocab));
  }
  std::vector<uint8_t> allowed(vocab);
  for (int i = 0; i < vocab; ++i) allowed[i] = (words[i / 32] >> (i % 32)) & 1u;
  // bool has no array constructor from a pointer here; uint8 then a cast is one small copy.
  auto mask = mx::astype(mx::array(allowed.data(), {vocab}, mx::uint8), mx::bool_);
  return mx::where(mask, logits, mx::array(-std::numeric_limits<float>::infinity(), logits.dtype()));
}

}  // namespace mlxcpp
