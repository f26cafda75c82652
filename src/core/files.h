// Whole-file reads shared by the loaders (each names the file in its own error type).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace mlxcpp {

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::filesystem::path& file);

}  // namespace mlxcpp
