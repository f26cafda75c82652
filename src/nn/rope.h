// Rotary embeddings as mlx-lm's rope_utils builds them: default, linear, dynamic (NTK), llama3,
// yarn, su/longrope (SuScaledRoPE) and proportional (Gemma 4), each ending in one mx.fast.rope call.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <mlx/array.h>

#include "cache/kv_cache.h"
#include "core/json_file.h"
#include "kernels/block_kernels.h"

namespace mlxcpp {

struct RopeParams {
  int dims = 0;
  double base = 10000.0;
  bool traditional = false;
  std::optional<int64_t> max_position_embeddings;
  // su/longrope: phi3 reads it from the config's top level; otherwise rope_scaling's own.
  std::optional<int64_t> original_max_position_embeddings = std::nullopt;
};

class Rope {
 public:
  // `scaling` is config.json's rope_scaling object, when present.
  static Rope create(const RopeParams& p, const std::optional<JsonView>& scaling);

  mlx::core::array operator()(const mlx::core::array& x, int offset) const;
  // Per-row offsets ([B] int32, a batch cache's row_offsets()): row b of x starts at offsets[b].
  mlx::core::array operator()(const mlx::core::array& x, const mlx::core::array& offsets) const;
  // The offsets of `cache` (a batch cache's rows) or its scalar offset (0 without a cache).
  mlx::core::array apply(const mlx::core::array& x, const KVCacheBase* cache) const;
  const std::string& type() const { return type_; }
  // The same rotation for our fused kernels (made once, at create); null where it depends on
  // the call (dynamic NTK).
  const std::shared_ptr<const kernels::RopeSpec>& kernel_spec() const { return spec_; }

 private:
  Rope() = default;
  std::string type_ = "default";
  RopeParams p_;
  float scale_ = 1.0f;                     // position scale (linear)
  double mscale_ = 1.0;                    // yarn / su input scale
  double dynamic_factor_ = 1.0;            // dynamic NTK
  std::optional<mlx::core::array> freqs_;  // llama3 / yarn / su
  std::shared_ptr<const kernels::RopeSpec> spec_;

  std::shared_ptr<const kernels::RopeSpec> build_spec() const;
  bool su() const;  // su / longrope (SuScaledRoPE)
  // The one mx.fast.rope call of every type but dynamic, at an int or per-row array offset.
  template <class Offset>
  mlx::core::array rotate(const mlx::core::array& x, const Offset& offset) const;
  // yarn's and su's input scaling (x[..., :dims] * mscale).
  mlx::core::array scaled_input(const mlx::core::array& x) const;
};

}  // namespace mlxcpp
