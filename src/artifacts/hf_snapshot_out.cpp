#include "artifacts/hf_snapshot_out.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <mlx/io.h>
#include <mlx/transforms.h>

#include "artifacts/py_json.h"
#include "core/errors.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;

namespace mlxcpp {

namespace {

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw ConfigError(fmt::format("{}: cannot write", file.string()));
}

bool is_extra(const std::string& name) {
  static const std::vector<std::string> kExact = {"generation_config.json", "special_tokens_map.json", "added_tokens.json",
                                                  "merges.txt", "tiktoken.model"};
  static const std::vector<std::string> kPrefixes = {"tokenizer", "chat_template", "vocab."};
  auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
  if (std::find(kExact.begin(), kExact.end(), name) != kExact.end()) return true;
  for (const auto& p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return ends(".py") || ends(".tiktoken") || ends(".jinja");
}

}  // namespace

StagingDir::StagingDir(fs::path out) : out_(out.lexically_normal()) {
  if (!out_.has_filename()) out_ = out_.parent_path();  // "dir/out/" names "dir/out"
  std::error_code ec;
  if (fs::exists(out_, ec)) {
    if (!fs::is_directory(out_, ec) || !fs::is_empty(out_, ec)) {
      throw ConfigError(fmt::format("--out: '{}' already exists and is not an empty folder (mlx_lm.convert refuses any "
                                    "existing path; remove it or pick another)", out_.string()));
    }
  }
  fs::path parent = out_.has_parent_path() ? out_.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) throw ConfigError(fmt::format("--out: cannot create '{}': {}", parent.string(), ec.message()));
  tmp_ = parent / fmt::format(".{}.partial-{}", out_.filename().string(), ::getpid());
  fs::remove_all(tmp_, ec);
  fs::create_directory(tmp_, ec);
  if (ec) throw ConfigError(fmt::format("--out: cannot create '{}': {}", tmp_.string(), ec.message()));
}

StagingDir::~StagingDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void StagingDir::commit() {
  std::error_code ec;
  if (fs::exists(out_, ec)) fs::remove(out_, ec);  // the empty folder checked in the constructor
  fs::rename(tmp_, out_, ec);
  if (ec) throw ConfigError(fmt::format("--out: cannot rename '{}' to '{}': {}", tmp_.string(), out_.string(), ec.message()));
  committed_ = true;
}

std::vector<std::string> write_weights(const fs::path& dir, NamedArrays weights, uint64_t total_parameters,
                                       uint64_t max_shard_bytes,
                                       const std::function<void(size_t, size_t, const std::string&)>& progress) {
  std::vector<std::vector<size_t>> shards;  // make_shards: a new shard when the next tensor would overflow
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const uint64_t n = weights[i].second.nbytes();
    if (shards.empty() || shard_bytes + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += n;
    total_bytes += n;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_bytes}, {"total_parameters", total_parameters}}}};
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> files;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string name = shards.size() == 1 ? "model.safetensors"
                                          : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    // Inserted in module-tree order like the dict mlx-lm hands to mx.save_safetensors: the map's
    // iteration order, hence the data layout, then comes out the same.
    std::unordered_map<std::string, mx::array> shard;
    for (size_t i : shards[s]) {
      mx::eval(weights[i].second);
      if (progress) progress(i + 1, weights.size(), weights[i].first);
      shard.emplace(weights[i].first, std::move(weights[i].second));
      weight_map[weights[i].first] = name;
    }
    try {
      mx::save_safetensors((dir / name).string(), std::move(shard), {{"format", "mlx"}});
    } catch (const std::exception& e) {
      throw WeightError(fmt::format("{}: cannot write: {}", (dir / name).string(), e.what()));
    }
    files.push_back(name);
  }
  nlohmann::ordered_json wm = nlohmann::ordered_json::object();
  for (const auto& [k, v] : weight_map) wm[k] = v;
  index["weight_map"] = std::move(wm);
  write_text(dir / "model.safetensors.index.json", python_json_dump(index));
  return files;
}

void write_config(const fs::path& file, nlohmann::ordered_json config) {
  config.erase("_name_or_path");
  config.erase("vision_config");
  if (config.contains("quantization")) config["quantization_config"] = config["quantization"];
  std::map<std::string, nlohmann::ordered_json> sorted;
  for (auto& [k, v] : config.items()) sorted.emplace(k, v);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (auto& [k, v] : sorted) out[k] = std::move(v);
  write_text(file, python_json_dump(out));
}

void copy_extras(const fs::path& src, const fs::path& dst) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || !is_extra(name)) continue;
    fs::copy_file(e.path(), dst / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw ConfigError(fmt::format("{}: cannot copy to {}: {}", e.path().string(), dst.string(), ec.message()));
  }
  if (ec) throw ConfigError(fmt::format("{}: cannot list the folder: {}", src.string(), ec.message()));
}

}  // namespace mlxcpp
