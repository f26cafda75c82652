#include "models/catalog.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "artifacts/checkpoint.h"
#include "core/errors.h"
#include "models/registry.h"

namespace fs = std::filesystem;

namespace mlxcpp {

namespace {

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

uintmax_t folder_bytes(const fs::path& dir) {
  uintmax_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code fe;
    if (fs::is_regular_file(it->path(), fe)) {  // follows links (the cache's snapshot -> blob)
      const auto n = fs::file_size(it->path(), fe);
      if (!fe) total += n;
    }
  }
  return total;
}

// "affine 4-bit g64" (+ " + N layer overrides" for per-layer entries), or the unquantized dtype.
std::string quantization_of(const nlohmann::json& config) {
  const nlohmann::json* q = nullptr;
  if (auto it = config.find("quantization"); it != config.end() && it->is_object()) q = &*it;
  if (!q) {
    if (auto it = config.find("quantization_config"); it != config.end() && it->is_object()) {
      return it->value("quant_method", std::string("quantized"));
    }
    for (const char* key : {"torch_dtype", "dtype"}) {
      if (auto it = config.find(key); it != config.end() && it->is_string()) return it->get<std::string>();
    }
    return "not quantized";
  }
  const std::string mode = q->value("mode", std::string("affine"));
  std::string s = fmt::format("{} {}-bit g{}", mode, q->value("bits", 0), q->value("group_size", 0));
  int overrides = 0;
  for (const auto& [key, v] : q->items()) overrides += v.is_object() || v.is_boolean();
  if (overrides > 0) s += fmt::format(" + {} layer overrides", overrides);
  return s;
}

// The snapshot folder an hf cache entry's refs/main names, else its only snapshot.
std::optional<fs::path> cache_snapshot(const fs::path& entry) {
  std::error_code ec;
  std::ifstream ref(entry / "refs" / "main");
  std::string hash;
  if (ref && std::getline(ref, hash) && !hash.empty() && fs::is_directory(entry / "snapshots" / hash, ec)) {
    return entry / "snapshots" / hash;
  }
  std::vector<fs::path> snaps;
  for (const auto& e : fs::directory_iterator(entry / "snapshots", ec)) {
    if (e.is_directory()) snaps.push_back(e.path());
  }
  if (snaps.size() == 1) return snaps.front();
  return std::nullopt;
}

}  // namespace

fs::path hf_hub_dir() {
  if (auto v = env_or("HF_HUB_CACHE"); !v.empty()) return v;
  if (auto v = env_or("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  return fs::path(env_or("HOME")) / ".cache" / "huggingface" / "hub";
}

std::vector<SnapshotEntry> list_snapshots(const fs::path& models_dir, const fs::path& hub) {
  std::vector<SnapshotEntry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models_dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "config.json")) {
      out.push_back({e.path().filename().string(), e.path(), "models"});
    }
  }
  for (const auto& e : fs::directory_iterator(hub, ec)) {
    const std::string dir = e.path().filename().string();
    if (!e.is_directory() || dir.rfind("models--", 0) != 0) continue;
    auto snap = cache_snapshot(e.path());
    if (!snap) continue;
    // models--ORG--NAME -> ORG/NAME ("--" separates; names themselves may hold single dashes).
    std::string name = dir.substr(8);
    if (auto at = name.find("--"); at != std::string::npos) name.replace(at, 2, "/");
    out.push_back({name, *snap, "hf-cache"});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

SnapshotInfo describe_snapshot(const fs::path& dir) {
  SnapshotInfo info;
  info.bytes = folder_bytes(dir);
  const fs::path config_file = dir / "config.json";
  std::ifstream in(config_file);
  if (!in) {
    info.why_not = "no config.json";
    return info;
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    info.why_not = fmt::format("config.json is not valid JSON ({})", e.what());
    return info;
  }
  if (!config.is_object()) {
    info.why_not = "config.json is not a JSON object";
    return info;
  }
  info.quantization = quantization_of(config);
  if (auto it = config.find("model_type"); it != config.end() && it->is_string()) info.model_type = it->get<std::string>();
  if (info.model_type.empty()) {
    info.why_not = "config.json has no model_type";
  } else if (const FamilyRecord* f = find_family(info.model_type)) {
    info.family = f->family;
  } else {
    info.why_not = fmt::format("model_type '{}' is not supported", info.model_type);
  }
  if (info.why_not.empty()) {
    try {  // the files load_model would read
      if (find_weight_files(dir).empty()) info.why_not = "no *.safetensors weights";
    } catch (const Error& e) {
      info.why_not = e.what();
    }
  }
  if (info.why_not.empty() && !fs::exists(dir / "tokenizer.json")) info.why_not = "no tokenizer.json";
  return info;
}

fs::path resolve_model_dir(const std::string& arg, bool require_config, const fs::path& models_dir,
                           const std::optional<fs::path>& hub) {
  std::error_code ec;
  if (fs::is_directory(arg, ec)) {
    if (require_config && !fs::exists(fs::path(arg) / "config.json")) {
      throw ConfigError(fmt::format("{}: not a model folder (no config.json; `mlxcpp ls` lists the models here)", arg));
    }
    return arg;
  }
  for (const auto& e : list_snapshots(models_dir, hub ? *hub : hf_hub_dir())) {
    const auto slash = e.name.find('/');
    if (e.name == arg || (slash != std::string::npos && e.name.substr(slash + 1) == arg)) return e.dir;
  }
  throw ConfigError(fmt::format("{}: not a model folder, nor a model name under {} or the Hugging Face cache ({}); "
                                "`mlxcpp ls` lists them",
                                arg, models_dir.string(), (hub ? *hub : hf_hub_dir()).string()));
}

std::string human_bytes(uintmax_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) v /= 1000.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace mlxcpp
