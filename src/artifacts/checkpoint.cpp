#include "artifacts/checkpoint.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "artifacts/safetensors.h"
#include "core/errors.h"

namespace fs = std::filesystem;

namespace mlxcpp {

namespace {

// The shard list of model.safetensors.index.json, in first-seen order.
std::vector<fs::path> shards_from_index(const fs::path& index_file) {
  auto j = JsonView::parse_file(index_file);
  JsonView root(&j, index_file.string());
  JsonView map = root.at("weight_map");
  std::vector<fs::path> files;
  std::set<std::string> seen;
  for (const auto& [tensor, shard] : map.node().items()) {
    if (!shard.is_string()) map.fail(tensor, "expected a file name, got " + shard.dump());
    auto name = shard.get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos) {
      map.fail(tensor, "shard '" + name + "' must be a file in the snapshot folder");
    }
    if (!seen.insert(name).second) continue;
    fs::path file = index_file.parent_path() / name;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw WeightError(fmt::format("{}: field '{}': shard '{}' does not exist", index_file.string(),
                                    map.field(tensor), name));
    }
    files.push_back(file);
  }
  return files;
}

}  // namespace

std::vector<fs::path> find_weight_files(const fs::path& dir) {
  fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) return shards_from_index(index);
  // Non-throwing filesystem calls: an unreadable folder is a WeightError, not a filesystem_error.
  fs::directory_iterator it(dir, ec);
  if (ec) throw WeightError(fmt::format("{}: cannot list the folder: {}", dir.string(), ec.message()));
  std::vector<fs::path> files;
  for (const auto& e : it) {
    auto name = e.path().filename().string();
    if (name.rfind("model", 0) == 0 && e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(fmt::format("{}: not a model folder (expected config.json and *.safetensors)", dir.string()));
  }
  Checkpoint c;
  c.dir_ = dir;
  c.config_file_ = dir / "config.json";
  c.config_ = JsonView::parse_file(c.config_file_);
  JsonView cfg = c.config();
  if (!c.config_.is_object()) throw ConfigError(c.config_file_.string() + ": expected a JSON object");
  c.model_type_ = cfg.req_string("model_type");
  c.quant_ = QuantConfig::from_config(cfg);
  c.eos_ids_ = cfg.int_list("eos_token_id");

  fs::path gen = dir / "generation_config.json";
  if (fs::exists(gen)) {
    c.generation_config_ = JsonView::parse_file(gen);
    JsonView g(&c.generation_config_, gen.string());
    if (!c.generation_config_.is_object()) throw ConfigError(gen.string() + ": expected a JSON object");
    auto ids = g.int_list("eos_token_id");
    if (!ids.empty()) c.eos_ids_ = ids;
  }
  c.weight_files_ = find_weight_files(dir);
  if (c.weight_files_.empty()) {
    throw WeightError(fmt::format("{}: no model*.safetensors files found", dir.string()));
  }
  return c;
}

int Checkpoint::context_length() const {
  auto c = config();
  if (auto tc = c.get("text_config")) {
    if (auto v = tc->opt_int("max_position_embeddings")) return static_cast<int>(*v);
  }
  if (auto v = c.opt_int("max_position_embeddings")) return static_cast<int>(*v);
  return 0;
}

WeightMap Checkpoint::load_weights() const {
  WeightMap map;
  for (const auto& f : weight_files_) {
    for (auto& [name, arr] : load_safetensors(f)) map.add(name, std::move(arr), f);
  }
  return map;
}

}  // namespace mlxcpp
