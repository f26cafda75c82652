// Per-architecture knowledge for GGUF import: how `general.architecture` metadata becomes an HF
// config.json, how llama.cpp tensor names map back to HF names, and which tensors llama.cpp's
// convert_hf_to_gguf.py changed on the way in (llama Q/K row permutation, Gemma norm +1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifacts/gguf.h"

namespace mlxcpp {

// What to undo on a tensor after dequantization/repacking.
struct GgufTensorFix {
  int unpermute_heads = 0;  // > 0: undo convert_hf_to_gguf's `permute` over this many heads
  float subtract = 0.0f;    // != 0: stored value minus this (Gemma RMSNorm weights carry +1)
};

class GgufArch {
 public:
  virtual ~GgufArch() = default;
  // HF config.json (model_type, sizes, rope, eps, tie_word_embeddings, bos/eos ids).
  virtual nlohmann::json config(const GgufFile& g) const = 0;
  // HF name of a GGUF tensor, or nullopt for tensors HF does not keep (e.g. rope_freqs).
  // An unknown name is a WeightError naming the file and tensor.
  virtual std::optional<std::string> hf_name(const GgufFile& g, const std::string& gguf_name) const = 0;
  virtual GgufTensorFix fix(const GgufFile& g, const std::string& hf_name) const = 0;
  // A second HF name the same tensor is written under (minicpm: the embedding as lm_head when
  // the GGUF has no output.weight), or nullopt.
  virtual std::optional<std::string> also_as(const GgufFile&, const std::string&) const { return std::nullopt; }
};

// The architectures we import; anything else is a ConfigError "unsupported architecture 'x'".
const GgufArch& gguf_arch_for(const GgufFile& g);
std::vector<std::string> supported_gguf_architectures();

}  // namespace mlxcpp
