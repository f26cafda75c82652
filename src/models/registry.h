// The one list of model families: model_type -> loader. Everything else derives from it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "nn/load_context.h"

namespace mlxcpp {

using FamilyLoader = std::unique_ptr<Model> (*)(const Checkpoint&, const LoadContext&);

struct FamilyRecord {
  std::string model_type;  // config.json's model_type
  std::string family;      // the file in src/models/ that implements it
  FamilyLoader load;
};

const std::vector<FamilyRecord>& families();
const FamilyRecord* find_family(const std::string& model_type);

// One line per family file for `mlxcpp ls --families`: its name, the model_types it accepts
// (from families()) and what it runs.
struct FamilySummary {
  std::string family;
  std::vector<std::string> model_types;
  std::string capabilities;
};
std::vector<FamilySummary> family_summaries();

// Family entry points (one per family file).
std::unique_ptr<Model> load_llama(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_gemma3(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_qwen3_5(const Checkpoint& ckpt, const LoadContext& ctx);
std::unique_ptr<Model> load_gemma4(const Checkpoint& ckpt, const LoadContext& ctx);

}  // namespace mlxcpp
