// `convert --hf`: an MLX-named safetensors snapshot (bf16/f16/f32, or MLX-quantized) in, an MLX
// snapshot out, as mlx_lm.convert writes it (convert.py, utils.py quantize_model, dequantize_model,
// save_model, save_config): the same tensors byte for byte (mx::quantize from the same MLX), the
// same config.json bytes, model.safetensors (or 5 GB shards) with the index, tokenizer files,
// generation_config.json and *.py copied. Written into a staging folder beside `out` and renamed
// at the end, so a failure never leaves a half-written snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlxcpp {

struct HfConvertOptions {
  bool quantize = false;
  bool dequantize = false;
  std::optional<int> bits;        // default by mode (affine 4, mxfp4 4, nvfp4 4, mxfp8 8)
  std::optional<int> group_size;  // default by mode (affine 64, mxfp4 32, nvfp4 16, mxfp8 32)
  std::string mode = "affine";    // affine, mxfp4, nvfp4, mxfp8
  // float16, bfloat16, float32; unset: config's torch_dtype (or text_config.dtype) when it is one.
  std::optional<std::string> dtype;
  std::optional<std::string> recipe;  // mixed_2_6, mixed_3_4, mixed_3_6, mixed_4_6
  // Largest safetensors file before a new shard starts (mlx-lm's MAX_FILE_SIZE_GB, 5 GiB).
  uint64_t max_shard_bytes = uint64_t{5} << 30;
  // Called after each tensor is computed and staged: (done, total, tensor name).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct HfConvertReport {
  std::string model_type;
  size_t tensors = 0;      // written
  size_t quantized = 0;    // modules quantized here
  size_t dequantized = 0;  // modules dequantized here
  std::vector<std::string> files;  // safetensors files written
  // A model_type convert_family does not list: same tensors as mlx-lm, but its module order (the
  // file layout, the order of per-layer config entries) guessed from llama's.
  bool order_guessed = false;
};

// ConfigError / WeightError naming the file, field or tensor; `out` must not exist or be empty.
HfConvertReport convert_hf(const std::filesystem::path& in, const std::filesystem::path& out,
                           const HfConvertOptions& options = {});

}  // namespace mlxcpp
