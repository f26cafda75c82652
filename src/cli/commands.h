// Subcommand wiring: each file registers its options on the CLI11 app and returns the action
// to run when that subcommand was chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace mlxcpp::cli {

using Action = std::function<int()>;

Action add_generate(CLI::App& app);
Action add_convert(CLI::App& app);
Action add_quantize(CLI::App& app);  // convert --hf under another name
Action add_chat(CLI::App& app);
Action add_tokenize(CLI::App& app);
Action add_embed(CLI::App& app);
Action add_bench(CLI::App& app);
Action add_serve(CLI::App& app);
Action add_ls(CLI::App& app);
Action add_perplexity(CLI::App& app);

}  // namespace mlxcpp::cli
