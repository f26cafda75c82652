// nn.Embedding and nn.QuantizedEmbedding, including as_linear for tied output heads.
#pragma once

#include <optional>
#include <string>

#include <mlx/array.h>

#include "nn/linear.h"

namespace mlxcpp {

class Embedding {
 public:
  static Embedding load(const LoadContext& ctx, const std::string& path, int num_embeddings, int dims);
  mlx::core::array operator()(const mlx::core::array& ids) const;
  mlx::core::array as_linear(const mlx::core::array& x) const;
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  Embedding() = default;
  std::optional<mlx::core::array> weight_;
  std::optional<QuantizedWeight> q_;
};

}  // namespace mlxcpp
