#include "cli/progress.h"

#include <iostream>

#include <fmt/format.h>

namespace mlxcpp::cli {

void progress_bar(size_t done, size_t total, const std::string& name) {
  constexpr int kWidth = 30;
  int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::cerr << fmt::format("\r[{}{}] {}/{} {:<40.40}", std::string(filled, '#'), std::string(kWidth - filled, ' '), done,
                           total, name)
            << (done == total ? "\n" : "") << std::flush;
}

}  // namespace mlxcpp::cli
