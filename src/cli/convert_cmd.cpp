// `mlxcpp convert --gguf FILE --out DIR`: a GGUF file becomes an MLX snapshot mlx-lm can load.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "artifacts/gguf_convert.h"
#include "cli/commands.h"
#include "core/errors.h"

namespace mlxcpp::cli {

namespace {

struct ConvertArgs {
  std::string gguf;
  std::string out;
  std::string dtype = "f32";
  bool force = false;
  bool tokenizer_only = false;
};

mlx::core::Dtype parse_dtype(const std::string& s) {
  if (s == "bf16") return mlx::core::bfloat16;
  if (s == "f16") return mlx::core::float16;
  if (s == "f32") return mlx::core::float32;
  throw ConfigError(fmt::format("--dtype: '{}' is not supported (known: bf16, f16, f32)", s));
}

// Refuses to write into a non-empty folder unless --force; creates it otherwise.
void prepare_out(const std::filesystem::path& out, bool force) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec)) {
    if (!std::filesystem::is_directory(out, ec)) throw ConfigError(fmt::format("--out: '{}' is not a directory", out.string()));
    if (!std::filesystem::is_empty(out, ec) && !force) {
      throw ConfigError(fmt::format("--out: '{}' is not empty (pass --force to overwrite)", out.string()));
    }
  }
  std::filesystem::create_directories(out, ec);
  if (ec) throw ConfigError(fmt::format("--out: cannot create '{}': {}", out.string(), ec.message()));
}

void progress_bar(size_t done, size_t total, const std::string& name) {
  constexpr int kWidth = 30;
  int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::cerr << fmt::format("\r[{}{}] {}/{} {:<40.40}", std::string(filled, '#'), std::string(kWidth - filled, ' '), done,
                           total, name)
            << (done == total ? "\n" : "") << std::flush;
}

int run(const ConvertArgs& a) {
  GgufConvertOptions opts;
  opts.dtype = parse_dtype(a.dtype);
  opts.tokenizer_only = a.tokenizer_only;
  if (::isatty(STDERR_FILENO)) opts.progress = progress_bar;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(a.gguf, ec)) {  // before creating --out
    throw WeightError(fmt::format("{}: {}", a.gguf, std::filesystem::exists(a.gguf, ec) ? "not a regular file" : "file does not exist"));
  }
  prepare_out(a.out, a.force);
  auto r = convert_gguf(a.gguf, a.out, opts);
  if (a.tokenizer_only) {
    std::cerr << fmt::format("wrote the tokenizer of {} to {}\n", a.gguf, a.out);
  } else {
    std::cerr << fmt::format("converted {} ({}): {} tensors ({} quantized exactly, {} requantized, {} dense) -> {}\n",
                             a.gguf, r.architecture, r.tensors, r.quantized, r.requantized, r.dense, a.out);
  }
  return 0;
}

}  // namespace

Action add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Convert a GGUF file into an MLX snapshot folder");
  sub->add_option("--gguf", a->gguf, "GGUF file (v2/v3)")->required();
  sub->add_option("--out", a->out, "Output folder (created; must be empty unless --force)")->required();
  sub->add_option("--dtype", a->dtype, "dtype of dense float tensors: bf16, f16, f32")->capture_default_str();
  sub->add_flag("--force", a->force, "Write into a non-empty output folder");
  sub->add_flag("--tokenizer-only", a->tokenizer_only, "Write only tokenizer.json and tokenizer_config.json");
  return [a] { return run(*a); };
}

}  // namespace mlxcpp::cli
