// mlxcpp: one binary, one subcommand per file. Errors become one line on stderr and exit 1.
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mlx/version.h>

#include "cli/commands.h"
#include "core/errors.h"

int main(int argc, char** argv) {
  CLI::App app{"mlxcpp: run MLX-format language models", "mlxcpp"};
  app.set_version_flag("--version", std::string("mlxcpp ") + MLXCPP_VERSION + " (MLX " + mlx::core::version() + ")");
  app.require_subcommand(1);
  std::map<CLI::App*, mlxcpp::cli::Action> actions;
  auto add = [&](mlxcpp::cli::Action (*fn)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    auto action = fn(app);
    actions[app.get_subcommands({})[before]] = std::move(action);
  };
  add(mlxcpp::cli::add_generate);
  add(mlxcpp::cli::add_convert);
  add(mlxcpp::cli::add_quantize);
  add(mlxcpp::cli::add_chat);
  add(mlxcpp::cli::add_tokenize);
  add(mlxcpp::cli::add_embed);
  add(mlxcpp::cli::add_bench);
  add(mlxcpp::cli::add_serve);
  add(mlxcpp::cli::add_ls);
  add(mlxcpp::cli::add_perplexity);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) return action();
    }
  } catch (const mlxcpp::Error& e) {
    std::cerr << "mlxcpp: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mlxcpp: error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
