// Gemma 4's per-layer input embeddings (mlx_lm/models/gemma4_text.py, Gemma4TextModel's
// _get_per_layer_inputs and _project_per_layer_inputs): a second embedding of the token ids and
// a projection of the scaled embeddings, summed, one hidden_size_per_layer_input slice per layer.
#pragma once

#include <string>
#include <vector>

#include <mlx/array.h>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"

namespace mlxcpp {

class PerLayerInputs {
 public:
  // `path`: the text model ("model", "language_model.model"); vocab: vocab_size_per_layer_input.
  static PerLayerInputs load(const LoadContext& ctx, const std::string& path, int vocab, int layers, int dim,
                             int hidden, float eps);
  // ids [B, L], h the scaled input embeddings [B, L, hidden] -> [B, L, layers, dim].
  mlx::core::array operator()(const mlx::core::array& ids, const mlx::core::array& h) const;
  // Layer i's slice [B, L, dim] of the above.
  static mlx::core::array layer(const mlx::core::array& all, int i);
  void collect(std::vector<mlx::core::array>& out) const;

 private:
  PerLayerInputs(int layers, int dim, int hidden, Embedding e, Linear p, RMSNorm n);
  int layers_, dim_;
  Embedding embed_;
  Linear proj_;
  RMSNorm norm_;
  double embed_scale_, proj_scale_;
};

}  // namespace mlxcpp
