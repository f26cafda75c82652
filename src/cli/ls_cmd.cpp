// `mlxcpp ls`: the MLX snapshots under models/ and in the Hugging Face cache, one line each
// (name, family, supported or why not, quantization, size); `--families` prints the registry.
#include <algorithm>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "models/catalog.h"
#include "models/registry.h"

namespace mlxcpp::cli {

namespace {

struct LsArgs {
  std::string models_dir = "models";
  bool families = false;
  bool paths = false;
};

int list_families() {
  for (const auto& f : family_summaries()) {
    std::cout << fmt::format("{:<8} model_types: {}; {}\n", f.family, fmt::join(f.model_types, ", "), f.capabilities);
  }
  return 0;
}

int list_models(const LsArgs& a) {
  const auto hub = hf_hub_dir();
  const auto entries = list_snapshots(a.models_dir, hub);
  if (entries.empty()) {
    std::cerr << fmt::format("no MLX snapshots under {} or in {}\n", a.models_dir, hub.string());
    return 0;
  }
  struct Row {
    std::string name, family, status, quant, size, path;
  };
  std::vector<Row> rows{{"NAME", "FAMILY", "STATUS", "QUANTIZATION", "SIZE", a.paths ? "PATH" : ""}};
  for (const auto& e : entries) {
    const SnapshotInfo info = describe_snapshot(e.dir);
    rows.push_back({e.name, info.family.empty() ? "-" : info.family,
                    info.why_not.empty() ? "supported" : "not supported: " + info.why_not,
                    info.quantization.empty() ? "-" : info.quantization, human_bytes(info.bytes),
                    a.paths ? e.dir.string() : ""});
  }
  size_t w[4] = {0, 0, 0, 0};
  for (const auto& r : rows) {
    w[0] = std::max(w[0], r.name.size()), w[1] = std::max(w[1], r.family.size());
    w[2] = std::max(w[2], r.status.size()), w[3] = std::max(w[3], r.quant.size());
  }
  for (const auto& r : rows) {
    std::string line = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>9}", r.name, w[0], r.family, w[1], r.status, w[2],
                                   r.quant, w[3], r.size);
    if (a.paths) line += "  " + r.path;
    std::cout << line << "\n";
  }
  return 0;
}

}  // namespace

Action add_ls(CLI::App& app) {
  auto a = std::make_shared<LsArgs>();
  auto* sub = app.add_subcommand("ls", "List the MLX snapshots under models/ and in the Hugging Face cache");
  sub->add_option("--models-dir", a->models_dir, "Folder of MLX snapshots")->capture_default_str();
  sub->add_flag("--families", a->families, "List the model families and the model_types each accepts");
  sub->add_flag("--paths", a->paths, "Add each snapshot's folder");
  return [a] { return a->families ? list_families() : list_models(*a); };
}

}  // namespace mlxcpp::cli
