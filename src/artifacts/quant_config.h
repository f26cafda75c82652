// MLX quantization as config.json's "quantization" block describes it (mlx-lm utils.load_model):
// a layer is quantized when the block names its path (a dict of its own settings, or false)
// or, failing that, when "<path>.scales" exists; bits/group_size are then read off the shapes.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "artifacts/weight_map.h"
#include "core/json_file.h"

namespace mlxcpp {

struct QuantSpec {
  int group_size = 64;
  int bits = 4;
  std::string mode = "affine";  // affine, mxfp4, nvfp4, mxfp8
};

class QuantConfig {
 public:
  QuantConfig() = default;
  // Reads "quantization" (or legacy "quantization_config" with quant_method mxfp4/mxfp8).
  static QuantConfig from_config(const JsonView& config);

  bool enabled() const { return default_.has_value(); }
  const std::optional<QuantSpec>& default_spec() const { return default_; }

  // The spec for the layer at `path` whose unquantized weight has `in_dims` columns, or
  // nullopt when the layer is stored unquantized.
  std::optional<QuantSpec> for_layer(const std::string& path, int in_dims,
                                     const WeightMap& weights) const;

 private:
  std::string file_;
  std::optional<QuantSpec> default_;
  std::map<std::string, std::optional<QuantSpec>> per_path_;  // nullopt = "false"
};

// mlx's defaults for a mode (affine 64/4, mxfp4 32/4, nvfp4 16/4, mxfp8 32/8); nullopt if unknown.
std::optional<QuantSpec> default_quant_spec(const std::string& mode);

// Validates a spec against what MLX supports; throws ConfigError naming `where`.
void check_quant_spec(const QuantSpec& q, const std::string& where);

}  // namespace mlxcpp
