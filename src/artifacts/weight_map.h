// A strict map of checkpoint tensors: families take what they use; anything left over after
// loading is an error listing the tensors and the file they came from.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

class WeightMap {
 public:
  void add(const std::string& name, mlx::core::array a, const std::filesystem::path& file);

  bool has(const std::string& name) const { return entries_.count(name) > 0; }
  // Shape of a tensor still in the map (for quantization inference); throws if absent.
  const mlx::core::array& peek(const std::string& name) const;
  // Removes and returns a tensor; a missing tensor or a different shape is a WeightError.
  mlx::core::array take(const std::string& name, const std::optional<mlx::core::Shape>& shape = std::nullopt);
  std::optional<mlx::core::array> take_optional(const std::string& name,
                                                const std::optional<mlx::core::Shape>& shape = std::nullopt);
  // Drops a tensor the family ignores (e.g. rotary inv_freq); no error if absent.
  void drop(const std::string& name) { entries_.erase(name); }
  // Throws a WeightError naming every unused tensor and its file.
  void expect_consumed() const;

  size_t size() const { return entries_.size(); }
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  struct Entry {
    mlx::core::array array;
    std::filesystem::path file;
  };
  // "<file>" for a single weight file, else "<dir>" (for errors about absent tensors).
  std::string where() const;
  std::string missing(const std::string& name) const;

  std::map<std::string, Entry> entries_;
  std::vector<std::filesystem::path> files_;  // every file added from, in order
};

}  // namespace mlxcpp
