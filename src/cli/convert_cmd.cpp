// `mlxcpp convert --gguf FILE --out DIR`: a GGUF file becomes an MLX snapshot mlx-lm can load.
// `mlxcpp convert --hf DIR --out DIR [-q ...]` (alias `mlxcpp quantize`): a safetensors snapshot
// becomes what mlx_lm.convert writes with the same options (quantized, dequantized or cast).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "artifacts/gguf_convert.h"
#include "artifacts/hf_convert.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "core/errors.h"

namespace mlxcpp::cli {

namespace {

struct ConvertArgs {
  std::string gguf;
  std::string hf;
  std::string out;
  std::string dtype;
  bool force = false;
  bool tokenizer_only = false;
  HfConvertOptions hf_opts;
  int bits = 0, group_size = 0;  // 0: the mode's default
  std::string recipe;
};

mlx::core::Dtype parse_gguf_dtype(const std::string& s) {
  if (s.empty() || s == "f32" || s == "float32") return mlx::core::float32;
  if (s == "bf16" || s == "bfloat16") return mlx::core::bfloat16;
  if (s == "f16" || s == "float16") return mlx::core::float16;
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

int run_gguf(const ConvertArgs& a) {
  GgufConvertOptions opts;
  opts.dtype = parse_gguf_dtype(a.dtype);
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

int run_hf(ConvertArgs a) {
  if (a.force) throw ConfigError("--force: not with --hf (the output folder must not exist or be empty)");
  if (a.tokenizer_only) throw ConfigError("--tokenizer-only: only with --gguf");
  HfConvertOptions& o = a.hf_opts;
  if (a.bits != 0) o.bits = a.bits;
  if (a.group_size != 0) o.group_size = a.group_size;
  if (!a.recipe.empty()) o.recipe = a.recipe;
  if (!a.dtype.empty()) {
    static const std::map<std::string, std::string> kShort = {{"bf16", "bfloat16"}, {"f16", "float16"}, {"f32", "float32"}};
    auto it = kShort.find(a.dtype);
    o.dtype = it == kShort.end() ? a.dtype : it->second;
  }
  if (::isatty(STDERR_FILENO)) o.progress = progress_bar;
  auto r = convert_hf(a.hf, a.out, o);
  if (r.order_guessed) {
    std::cerr << fmt::format("note: model_type '{}' is not one convert knows; tensors as mlx_lm.convert writes them, "
                             "their order in the file (and of per-layer quantization entries) guessed from llama's\n",
                             r.model_type);
  }
  std::cerr << fmt::format("converted {} ({}): {} tensors, {} modules quantized, {} dequantized -> {} ({})\n", a.hf,
                           r.model_type, r.tensors, r.quantized, r.dequantized, a.out, fmt::join(r.files, ", "));
  return 0;
}

// mlx_lm.convert's flags (same names and values).
void add_hf_options(CLI::App* sub, ConvertArgs& a) {
  sub->add_flag("-q,--quantize", a.hf_opts.quantize, "Quantize (--hf)");
  sub->add_option("--q-bits", a.bits, "Bits per weight (affine 2,3,4,5,6,8; default by mode)");
  sub->add_option("--q-group-size", a.group_size, "Group size (affine 32,64,128; default by mode)");
  sub->add_option("--q-mode", a.hf_opts.mode, "Quantization mode: affine, mxfp4, nvfp4, mxfp8")->capture_default_str();
  sub->add_option("--quant-predicate", a.recipe, "Mixed-bit recipe: mixed_2_6, mixed_3_4, mixed_3_6, mixed_4_6");
  sub->add_flag("-d,--dequantize", a.hf_opts.dequantize, "Dequantize a quantized snapshot (--hf)");
}

}  // namespace

Action add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Convert a GGUF file or a safetensors snapshot into an MLX snapshot folder");
  auto* gguf = sub->add_option("--gguf", a->gguf, "GGUF file (v2/v3)");
  auto* hf = sub->add_option("--hf", a->hf, "Safetensors snapshot folder (like mlx_lm.convert --hf-path)");
  gguf->excludes(hf);
  sub->add_option("--out", a->out, "Output folder (must not exist or be empty)")->required();
  sub->add_option("--dtype", a->dtype, "Dense float dtype: float16, bfloat16, float32 (--gguf default float32; --hf default: config's torch_dtype)");
  sub->add_flag("--force", a->force, "Write into a non-empty output folder (--gguf)");
  sub->add_flag("--tokenizer-only", a->tokenizer_only, "Write only tokenizer.json and tokenizer_config.json (--gguf)");
  add_hf_options(sub, *a);
  return [a] {
    if (a->gguf.empty() == a->hf.empty()) throw ConfigError("convert: give one of --gguf FILE or --hf DIR");
    return a->gguf.empty() ? run_hf(*a) : run_gguf(*a);
  };
}

Action add_quantize(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("quantize", "convert --hf under another name: a safetensors snapshot into an MLX snapshot");
  sub->add_option("--hf", a->hf, "Safetensors snapshot folder")->required();
  sub->add_option("--out", a->out, "Output folder (must not exist or be empty)")->required();
  sub->add_option("--dtype", a->dtype, "Dense float dtype: float16, bfloat16, float32 (default: config's torch_dtype)");
  add_hf_options(sub, *a);
  return [a] { return run_hf(*a); };
}

}  // namespace mlxcpp::cli
