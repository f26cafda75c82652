// The model interface every family implements, and how a snapshot folder becomes a Model.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "artifacts/checkpoint.h"
#include "cache/kv_cache.h"
#include "kernels/kernel_context.h"
#include "kernels/ops.h"

namespace mlxcpp {

struct ModelOptions {
  // Parity mode: stock MLX ops, float32 activations (floating weights cast to float32), logits
  // bit-identical to mlx-lm. Otherwise, on CPU, the fast path: our kernels (float32 too).
  bool parity = false;
  kernels::KernelOptions kernels;

  static ModelOptions parity_mode() {
    ModelOptions o;
    o.parity = true;
    return o;
  }
};

class Model {
 public:
  virtual ~Model() = default;
  // ids [B, L] (int32) -> logits [B, L, vocab]. `caches` may be null (no cache).
  virtual mlx::core::array operator()(const mlx::core::array& ids, LayerCaches* caches) const = 0;
  // ids [B, L] -> the final normed hidden states [B, L, hidden_size()]: the head's input (what
  // operator() turns into logits, and what embeddings pool). `caches` as in operator().
  virtual mlx::core::array hidden_states(const mlx::core::array& ids, LayerCaches* caches) const = 0;
  virtual int hidden_size() const = 0;
  // One cache per layer, as the family's make_cache in mlx-lm.
  virtual LayerCaches make_cache() const = 0;
  virtual int vocab_size() const = 0;
  virtual int num_layers() const = 0;
  // Every parameter array (to evaluate or measure after loading).
  virtual std::vector<mlx::core::array> parameters() const = 0;

  // The fast path's context this model was loaded with (null in parity mode / off CPU); what
  // runs on its output (the log-softmax over the vocabulary) uses it too.
  const kernels::FastPath& fast_path() const { return fast_path_; }
  void set_fast_path(kernels::FastPath fast) { fast_path_ = std::move(fast); }

 private:
  kernels::FastPath fast_path_;
};

struct LoadedModel {
  std::unique_ptr<Model> model;
  Checkpoint checkpoint;
  kernels::FastPath kernels;  // the fast path's context (null in parity mode / off CPU)
};

// Opens the folder, picks the family by config.json's model_type, takes every tensor
// (leftovers are an error) and evaluates the weights.
LoadedModel load_model(const std::filesystem::path& dir, const ModelOptions& opts = {});

}  // namespace mlxcpp
