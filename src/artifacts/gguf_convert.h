// GGUF -> MLX snapshot (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
// generation_config.json) that mlx-lm loads as is. Quantized GGML tensors become MLX affine
// layers (lossless where gguf_quant.h says so, else requantized); the `quantization` block holds
// the most common {group_size, bits} plus per-path overrides.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include <mlx/dtype.h>

namespace mlxcpp {

struct GgufConvertOptions {
  // dtype of every dense floating tensor written (F32/F16/BF16 sources and dequantized ones);
  // float32 also makes quantized scales/biases float32 (MLX's CPU path is ~40x faster in f32).
  mlx::core::Dtype dtype = mlx::core::float32;
  bool tokenizer_only = false;  // write only tokenizer.json / tokenizer_config.json
  // Called after each tensor: (done, total, hf name).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct GgufConvertReport {
  std::string architecture;
  size_t tensors = 0;       // written (quantized layers count once)
  size_t quantized = 0;     // kept as MLX affine without loss
  size_t requantized = 0;   // affine but not bit-exact (e.g. Q6_K -> 8-bit)
  size_t dense = 0;
};

// `out` must exist (the CLI decides about overwriting).
GgufConvertReport convert_gguf(const std::filesystem::path& gguf, const std::filesystem::path& out,
                               const GgufConvertOptions& options = {});

}  // namespace mlxcpp
