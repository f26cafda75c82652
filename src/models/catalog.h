// The MLX snapshots on this machine (`mlxcpp ls`): folders under models/ and Hugging Face cache
// entries (hub/models--ORG--NAME, refs/main -> snapshots/HASH), each described without loading
// it: family, whether mlxcpp runs it (or why not), quantization, size on disk. Also how a
// --model argument becomes a folder: a folder as given, else a name `ls` shows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mlxcpp {

struct SnapshotEntry {
  std::string name;  // models/: the folder's name; the cache: ORG/NAME
  std::filesystem::path dir;
  std::string source;  // "models" or "hf-cache"
};

struct SnapshotInfo {
  std::string model_type;    // "" when config.json is missing or unreadable
  std::string family;        // the registry's family ("" when unsupported)
  std::string why_not;       // "" when mlxcpp runs it
  std::string quantization;  // e.g. "affine 4-bit g64", "affine 4-bit g32 + 27 layer overrides", "bfloat16"
  uintmax_t bytes = 0;       // files in the folder (links followed: the cache's blobs)
};

// The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::filesystem::path hf_hub_dir();

// Snapshots under models_dir (each sub-folder with a config.json) and in the hub cache (each
// models--* entry whose refs/main names a snapshot folder, or that has exactly one), sorted by
// name. Missing roots give nothing.
std::vector<SnapshotEntry> list_snapshots(const std::filesystem::path& models_dir, const std::filesystem::path& hub);

// What `ls` prints for one folder; never throws on a broken snapshot (why_not says what is wrong).
SnapshotInfo describe_snapshot(const std::filesystem::path& dir);

// A --model argument as a folder: an existing folder as is (with require_config, one without
// config.json is an Error saying it is not a model folder), else the snapshot that list_snapshots
// shows under that name (ORG/NAME or NAME), else an Error naming the argument.
std::filesystem::path resolve_model_dir(const std::string& arg, bool require_config = true,
                                        const std::filesystem::path& models_dir = "models",
                                        const std::optional<std::filesystem::path>& hub = std::nullopt);

// "135.3 MB" (powers of 1000, as `ls` prints sizes).
std::string human_bytes(uintmax_t bytes);

}  // namespace mlxcpp
