// Text embeddings from a causal LM, as Qwen3-Embedding is used (its model card, and
// sentence-transformers' "lasttoken" pooling + Normalize): the final normed hidden state of each
// input's last token, L2-normalized. Token ids in (the tokenizer appends what the model expects,
// e.g. Qwen3-Embedding's <|endoftext|>); one float32 vector per input out.
#pragma once

#include <vector>

#include <mlx/array.h>

#include "models/model.h"

namespace mlxcpp {

struct EmbedOptions {
  bool normalize = true;
  // > 0: keep the first `dimensions` values (Matryoshka, as Qwen3-Embedding documents), then
  // normalize those. 0: all hidden_size values.
  int dimensions = 0;
  // An input longer than this runs through a fresh cache in chunks of this many tokens (the
  // attention scores of one forward grow with the square of its length).
  int step_size = 2048;
  // Inputs of one length run as one batch while rows x length stays within this (no padding:
  // each row comes out as it would alone).
  int max_batch_tokens = 2048;
};

// x / max(||x||_2, 1e-12) over the last axis (torch's F.normalize), in x's dtype.
mlx::core::array l2_normalize(const mlx::core::array& x);

// ids [B, L] -> [B, hidden] float32: each row's last-token hidden state (no truncation or
// normalization). L > step_size runs in chunks through a fresh cache.
mlx::core::array last_token_states(const Model& model, const mlx::core::array& ids, int step_size);

// The embedding of every input, in order. Throws RequestError for an empty input, an id outside
// the vocabulary or dimensions outside [0, hidden_size] (naming the input by its index).
std::vector<std::vector<float>> embed(const Model& model, const std::vector<std::vector<int>>& inputs,
                                      const EmbedOptions& opts = {});

}  // namespace mlxcpp
