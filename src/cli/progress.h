// One progress line on stderr (`\r`-rewritten; a newline when done) for the long CLI commands.
// Callers show it only when stderr is a terminal.
#pragma once

#include <cstddef>
#include <string>

namespace mlxcpp::cli {

// "[#####     ] done/total name"
void progress_bar(size_t done, size_t total, const std::string& name);

}  // namespace mlxcpp::cli
