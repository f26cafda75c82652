// What `convert --hf` needs to know of mlx-lm's model classes, which a weight file does not say:
// the order of each module's children (mlx-lm writes parameters, and the per-layer entries of
// config["quantization"], in module-tree order), the model's own quant_predicate (qwen3_moe:
// router at 8 bits; granite: o_proj/down_proj/lm_head at 8 bits) and cast_predicate (glm4_moe:
// the router's correction bias stays float32) and what its ModelArgs write into the config. Read off mlx_lm/models/<model_type>.py.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlxcpp {

class ConvertFamily {
 public:
  // Unknown model types get the llama layout (names it lacks sort after the known ones).
  static const ConvertFamily& for_model_type(const std::string& model_type);
  static bool known(const std::string& model_type);

  const std::string& model_type() const { return model_type_; }
  // Sorts parameter names into the order tree_flatten(model.parameters()) gives.
  void sort_parameters(std::vector<std::string>& names) const;
  // The model's quant_predicate for a module path: nullopt = quantize with the defaults, else
  // the dict it returns (written to config["quantization"][path]).
  std::optional<nlohmann::ordered_json> quant_override(const std::string& path) const;
  // cast_predicate: whether --dtype (or torch_dtype) casts this parameter.
  bool casts(const std::string& name) const;
  // What the ModelArgs' __post_init__ writes into the config dict mlx-lm later saves (gemma3:
  // text_config's vocab_size and head counts; mistral3: text_config's tie_word_embeddings).
  void patch_config(nlohmann::ordered_json& config) const {
    if (patch_) patch_(config);
  }

 private:
  struct Children {
    std::string parent;  // the parent's last non-numeric path component ("" for the root)
    std::vector<std::string> order;
  };
  int rank(const std::string& parent, const std::string& child) const;

  std::string model_type_;
  std::vector<Children> children_;  // searched before the shared llama layout
  std::vector<std::string> eight_bit_;   // path suffixes ("=path": whole path) its quant_predicate puts at 8 bits
  std::vector<std::string> no_cast_;
  std::function<void(nlohmann::ordered_json&)> patch_;       // name fragments the cast_predicate skips
  friend struct ConvertFamilyTable;
};

}  // namespace mlxcpp
