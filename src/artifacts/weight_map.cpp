#include "artifacts/weight_map.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {
std::string shape_str(const mx::Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }
}  // namespace

void WeightMap::add(const std::string& name, mx::array a, const std::filesystem::path& file) {
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    throw WeightError(fmt::format("{}: tensor '{}': also in {}", file.string(), name,
                                  it->second.file.string()));
  }
  entries_.emplace(name, Entry{std::move(a), file});
  if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(file);
}

std::string WeightMap::where() const {
  if (files_.empty()) return "<no weight files>";
  if (files_.size() == 1) return files_.front().string();
  return files_.front().parent_path().string();
}

std::string WeightMap::missing(const std::string& name) const {
  std::vector<std::string> shards;
  for (const auto& f : files_) shards.push_back(f.filename().string());
  if (files_.size() > 1) {
    return fmt::format("{}: tensor '{}': missing (not in any of {})", where(), name, fmt::join(shards, ", "));
  }
  return fmt::format("{}: tensor '{}': missing from the checkpoint", where(), name);
}

const mx::array& WeightMap::peek(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw WeightError(missing(name));
  return it->second.array;
}

std::optional<mx::array> WeightMap::take_optional(const std::string& name,
                                                  const std::optional<mx::Shape>& shape) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  mx::array a = it->second.array;
  if (shape && a.shape() != *shape) {
    throw WeightError(fmt::format("{}: tensor '{}': has shape {}, expected {}",
                                  it->second.file.string(), name, shape_str(a.shape()),
                                  shape_str(*shape)));
  }
  entries_.erase(it);
  return a;
}

mx::array WeightMap::take(const std::string& name, const std::optional<mx::Shape>& shape) {
  auto a = take_optional(name, shape);
  if (!a) {
    throw WeightError(missing(name));
  }
  return *a;
}

void WeightMap::expect_consumed() const {
  if (entries_.empty()) return;
  // Lead with the first leftover in the usual "<file>: tensor '<name>'" form, then list them all.
  const auto& [first, first_entry] = *entries_.begin();
  std::string msg = fmt::format("{}: tensor '{}': not used by the model", first_entry.file.string(), first);
  if (entries_.size() == 1) throw WeightError(msg);
  std::vector<std::string> left;
  for (const auto& [name, e] : entries_) {
    left.push_back(fmt::format("{} ({})", name, e.file.filename().string()));
    if (left.size() == 20) {
      left.push_back(fmt::format("... {} more", entries_.size() - 20));
      break;
    }
  }
  throw WeightError(fmt::format("{} ({} unused tensors: {})", msg, entries_.size(), fmt::join(left, ", ")));
}

std::string WeightMap::file_of(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? std::string() : it->second.file.string();
}

std::vector<std::string> WeightMap::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

}  // namespace mlxcpp
