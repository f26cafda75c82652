// What the GGUF architecture files share (gguf_arch.cpp: the dense families and the table;
// gguf_arch_moe.cpp: qwen3moe, glm4, glm4moe). Internal to src/artifacts.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "artifacts/gguf.h"
#include "artifacts/gguf_arch.h"

namespace mlxcpp::gguf_detail {

// "<arch>.<key>" accessors.
struct Keys {
  const GgufFile& g;
  std::string arch;
  std::string k(const std::string& key) const { return arch + "." + key; }
  int64_t req(const std::string& key) const { return g.req_int(k(key)); }
  int64_t get(const std::string& key, int64_t dflt) const { return g.opt_int(k(key)).value_or(dflt); }
  double num(const std::string& key, double dflt) const { return g.opt_number(k(key)).value_or(dflt); }
};

using BlockNames = std::map<std::string, std::string>;

// Sizes, eps, vocabulary, tying and special ids, plus the HF class, model_type and rope_theta
// (GGUF's freq_base, else `theta`).
nlohmann::json family_config(const GgufFile& g, const Keys& k, const char* cls, const char* model_type, double theta);
// rope.scaling.{type,factor,original_context_length} -> HF rope_scaling (linear and yarn only).
std::optional<nlohmann::json> rope_scaling(const GgufFile& g, const Keys& k);
// "blk.N.<part>.<weight|bias>" and top-level names -> HF names via a family's block table (an
// empty HF name: dropped). An unknown name is a WeightError naming the file and tensor.
std::optional<std::string> map_name(const GgufFile& g, const std::string& name, const BlockNames& block);
// The attention and dense-MLP names every family shares, plus a family's own.
BlockNames block_names(std::initializer_list<std::pair<const std::string, std::string>> extra);
// N of "blk.N.…", or -1.
int block_index(const std::string& name);

// The sparse families and GLM-4 (gguf_arch_moe.cpp).
const GgufArch& qwen3moe_arch();
const GgufArch& glm4_arch();
const GgufArch& glm4moe_arch();

}  // namespace mlxcpp::gguf_detail
