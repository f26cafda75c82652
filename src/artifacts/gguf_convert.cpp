#include "artifacts/gguf_convert.h"

#include <fstream>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <mlx/io.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "artifacts/gguf.h"
#include "artifacts/gguf_arch.h"
#include "artifacts/gguf_quant.h"
#include "artifacts/gguf_tokenizer.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

using nlohmann::json;

namespace {

// Undoes convert_hf_to_gguf.py's permute(): GGUF row (h, i, j) holds HF row (h, j, i) for
// i < head_dim/2, j < 2. Works on the weight, scales and biases of a quantized layer alike.
mx::array unpermute_rows(const mx::array& a, int heads, const std::string& name) {
  const int rows = a.shape(0);
  if (heads <= 0 || rows % (2 * heads) != 0) {
    throw WeightError(fmt::format("tensor '{}': {} rows cannot be split into {} heads of even size", name, rows, heads));
  }
  mx::Shape split = {heads, rows / heads / 2, 2};
  split.insert(split.end(), a.shape().begin() + 1, a.shape().end());
  return mx::reshape(mx::swapaxes(mx::reshape(a, split), 1, 2), a.shape());
}

struct QuantKey {
  int bits, group_size;
  auto operator<=>(const QuantKey&) const = default;
};

class SnapshotWriter {
 public:
  SnapshotWriter(const GgufFile& g, const GgufArch& arch, const GgufConvertOptions& o) : g_(g), arch_(arch), o_(o) {}

  void add(const GgufTensorInfo& info, GgufConvertReport& report) {
    auto hf = arch_.hf_name(g_, info.name);
    if (!hf) return;
    const GgufTensorFix fix = arch_.fix(g_, *hf);
    GgmlConvertOptions copts;  // lossless where possible, Q2_K/Q3_K/Q6_K requantized to 8-bit
    // float32 scales with float32 weights: MLX's CPU kernels are far slower on half types.
    if (o_.dtype == mx::float32) copts.scales_dtype = mx::float32;
    auto converted = convert_ggml_tensor(g_.tensor_view(info), copts);
    const auto copy = arch_.also_as(g_, *hf);
    if (auto* q = std::get_if<MlxAffine>(&converted)) {
      add_quantized(*hf, *q, fix, report);
      GgufConvertReport uncounted;  // the copy is no tensor of the GGUF's
      if (copy) add_quantized(*copy, *q, fix, uncounted);
    } else {
      add_dense(*hf, std::get<mx::array>(converted), fix, info);
      if (copy) add_dense(*copy, std::get<mx::array>(converted), fix, info);
      ++report.dense;
    }
    ++report.tensors;
  }

  json quantization_block() const {
    if (quant_.empty()) return nullptr;
    std::map<QuantKey, int> counts;
    for (const auto& [_, k] : quant_) ++counts[k];
    QuantKey best = counts.begin()->first;
    for (const auto& [k, n] : counts) {
      if (n > counts[best]) best = k;
    }
    json q = {{"group_size", best.group_size}, {"bits", best.bits}, {"mode", "affine"}};
    for (const auto& [path, k] : quant_) {
      if (k != best) q[path] = {{"group_size", k.group_size}, {"bits", k.bits}, {"mode", "affine"}};
    }
    return q;
  }

  void save(const std::filesystem::path& file) {
    try {
      mx::save_safetensors(file.string(), arrays_, {{"format", "mlx"}});
    } catch (const std::exception& e) {
      throw WeightError(fmt::format("{}: cannot write: {}", file.string(), e.what()));
    }
  }

 private:
  void add_quantized(const std::string& hf, MlxAffine q, const GgufTensorFix& fix, GgufConvertReport& report) {
    const std::string suffix = ".weight";
    if (hf.size() <= suffix.size() || hf.compare(hf.size() - suffix.size(), suffix.size(), suffix) != 0) {
      throw WeightError(fmt::format("{}: tensor '{}' is quantized but HF keeps it unquantized", g_.path().string(), hf));
    }
    if (fix.subtract != 0.0f) {
      throw WeightError(fmt::format("{}: tensor '{}': a quantized norm weight is not supported", g_.path().string(), hf));
    }
    if (fix.unpermute_heads > 0) {
      q.weight = unpermute_rows(q.weight, fix.unpermute_heads, hf);
      q.scales = unpermute_rows(q.scales, fix.unpermute_heads, hf);
      q.biases = unpermute_rows(q.biases, fix.unpermute_heads, hf);
    }
    const std::string base = hf.substr(0, hf.size() - suffix.size());
    put(base + ".weight", q.weight);
    put(base + ".scales", q.scales);
    put(base + ".biases", q.biases);
    quant_[base] = {q.bits, q.group_size};
    ++(q.lossless ? report.quantized : report.requantized);
  }

  void add_dense(const std::string& hf, mx::array a, const GgufTensorFix& fix, const GgufTensorInfo& info) {
    const bool floating = mx::issubdtype(a.dtype(), mx::floating);
    if (fix.unpermute_heads > 0) a = unpermute_rows(a, fix.unpermute_heads, hf);
    if (fix.subtract != 0.0f) {
      if (!floating) throw WeightError(fmt::format("{}: tensor '{}' is not floating", g_.path().string(), info.name));
      a = mx::subtract(mx::astype(a, mx::float32), mx::array(fix.subtract));
    }
    if (floating) a = mx::astype(a, o_.dtype);
    put(hf, a);
  }

  void put(const std::string& name, mx::array a) {
    mx::eval(a);
    if (!arrays_.emplace(name, std::move(a)).second) {
      throw WeightError(fmt::format("{}: two tensors map to '{}'", g_.path().string(), name));
    }
  }

  const GgufFile& g_;
  const GgufArch& arch_;
  const GgufConvertOptions& o_;
  std::unordered_map<std::string, mx::array> arrays_;
  std::map<std::string, QuantKey> quant_;  // module path -> settings
};

void write_json(const std::filesystem::path& file, const json& j) {
  std::ofstream out(file, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw ConfigError(fmt::format("{}: cannot write", file.string()));
}

}  // namespace

GgufConvertReport convert_gguf(const std::filesystem::path& gguf, const std::filesystem::path& out,
                               const GgufConvertOptions& options) {
  GgufFile g = GgufFile::open(gguf);
  GgufConvertReport report;
  report.architecture = g.opt_string("general.architecture").value_or("");
  if (options.tokenizer_only) {
    write_hf_tokenizer(g, out);
    return report;
  }
  const GgufArch& arch = gguf_arch_for(g);  // unsupported architectures fail before any output
  json config = arch.config(g);
  write_hf_tokenizer(g, out);

  SnapshotWriter writer(g, arch, options);
  const auto& tensors = g.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    writer.add(tensors[i], report);
    if (options.progress) options.progress(i + 1, tensors.size(), tensors[i].name);
  }
  json q = writer.quantization_block();
  if (!q.is_null()) {
    config["quantization"] = q;
    config["quantization_config"] = q;
  }
  writer.save(out / "model.safetensors");
  write_json(out / "config.json", config);
  json gen = json::object();
  if (config.contains("bos_token_id")) gen["bos_token_id"] = config["bos_token_id"];
  if (config.contains("eos_token_id")) gen["eos_token_id"] = config["eos_token_id"];
  write_json(out / "generation_config.json", gen);
  return report;
}

}  // namespace mlxcpp
