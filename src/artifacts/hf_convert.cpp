#include "artifacts/hf_convert.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "artifacts/convert_family.h"
#include "artifacts/hf_sanitize.h"
#include "artifacts/hf_snapshot_out.h"
#include "artifacts/quant_config.h"
#include "artifacts/quantize_recipe.h"
#include "artifacts/safetensors.h"
#include "core/errors.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;

namespace mlxcpp {

using ojson = nlohmann::ordered_json;

namespace {

// quantize_model's defaults_for_mode: (group_size, bits).
std::pair<int, int> mode_defaults(const std::string& mode) {
  auto d = default_quant_spec(mode);
  if (!d) throw ConfigError(fmt::format("--q-mode: '{}' is not supported (known: affine, mxfp4, nvfp4, mxfp8)", mode));
  return {d->group_size, d->bits};
}

std::optional<mx::Dtype> conversion_dtype(const std::string& s) {
  if (s == "float16") return mx::float16;
  if (s == "bfloat16") return mx::bfloat16;
  if (s == "float32") return mx::float32;
  return std::nullopt;
}

void check_options(const HfConvertOptions& o) {
  if (o.quantize && o.dequantize) throw ConfigError("--quantize and --dequantize: choose one (mlx-lm: 'Choose either quantize or dequantize, not both.')");
  if (o.dtype && !conversion_dtype(*o.dtype)) {
    throw ConfigError(fmt::format("--dtype: '{}' is not supported (known: float16, bfloat16, float32)", *o.dtype));
  }
  if (!o.quantize) return;
  auto [group, bits] = mode_defaults(o.mode);
  if (o.recipe && o.mode != "affine") {
    throw ConfigError(fmt::format("--quant-predicate {}: recipes only support --q-mode affine, got '{}'", *o.recipe, o.mode));
  }
  check_quant_spec({o.group_size.value_or(group), o.bits.value_or(bits), o.mode}, "--q-bits/--q-group-size/--q-mode");
}

std::string module_of(const std::string& name) {
  auto dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

struct Snapshot {
  ojson config;
  std::map<std::string, mx::array> weights;
};

// The dtypes a snapshot mlx-lm converts holds: floating weights, packed quantized ones.
void check_dtypes(const fs::path& file) {
  static const std::set<std::string> kKnown = {"F32", "F16", "BF16", "U32", "U8"};
  for (const auto& t : read_safetensors_header(file).tensors) {
    if (!kKnown.count(t.dtype)) {
      throw WeightError(fmt::format("{}: tensor '{}': dtype {} is not supported by convert --hf (known: F32, F16, BF16, "
                                    "and U32/U8 of MLX-quantized layers)", file.string(), t.name, t.dtype));
    }
  }
}

Snapshot read_snapshot(const fs::path& in) {
  std::error_code ec;
  const fs::path cfg_file = in / "config.json";
  if (!fs::is_directory(in, ec)) throw ConfigError(fmt::format("--hf: '{}' is not a folder", in.string()));
  if (!fs::is_regular_file(cfg_file, ec)) {
    throw ConfigError(fmt::format("--hf: '{}' is not a model snapshot: no config.json", in.string()));
  }
  Snapshot s;
  try {
    std::ifstream f(cfg_file);
    s.config = ojson::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", cfg_file.string(), e.what()));
  }
  if (!s.config.is_object() || !s.config.contains("model_type") || !s.config["model_type"].is_string()) {
    throw ConfigError(fmt::format("{}: field 'model_type': missing or not a string", cfg_file.string()));
  }
  // load_config: generation_config.json's eos_token_id, when truthy, replaces config's.
  try {
    std::ifstream g(in / "generation_config.json");
    if (g) {
      auto gen = ojson::parse(g);
      auto eos = gen.is_object() && gen.contains("eos_token_id") ? gen["eos_token_id"] : ojson();
      const bool truthy = !(eos.is_null() || eos == false || eos == 0 || (eos.is_array() && eos.empty()) || eos == "");
      if (truthy) s.config["eos_token_id"] = eos;
    }
  } catch (const nlohmann::json::exception&) {  // mlx-lm ignores a bad generation_config.json
  }
  std::vector<fs::path> files;  // load_model's glob, index or not
  for (const auto& e : fs::directory_iterator(in, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind("model", 0) == 0 && e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw WeightError(fmt::format("--hf: '{}' is not a model snapshot: no model*.safetensors", in.string()));
  for (const auto& file : files) {
    check_dtypes(file);
    for (auto& [name, a] : load_safetensors(file)) {
      if (!s.weights.emplace(name, a).second) throw WeightError(fmt::format("{}: tensor '{}' is in two weight files", file.string(), name));
    }
  }
  return s;
}

void cast_weights(Snapshot& s, const ConvertFamily& fam, const HfConvertOptions& o) {
  // convert(): --dtype, else config's torch_dtype, else (when that is null) text_config's dtype.
  ojson d = o.dtype ? ojson(*o.dtype) : s.config.value("torch_dtype", ojson());
  const ojson text = s.config.value("text_config", ojson());
  if (d.is_null() && text.is_object() && !text.empty()) d = text.value("dtype", ojson());
  const std::optional<std::string> name = d.is_string() ? std::optional(d.get<std::string>()) : std::nullopt;
  auto dtype = name ? conversion_dtype(*name) : std::nullopt;
  if (!dtype) return;
  for (auto& [k, v] : s.weights) {
    if (fam.casts(k) && mx::issubdtype(v.dtype(), mx::floating)) v = mx::astype(v, *dtype);
  }
}

// A module nn.quantize would call to_quantized on: Linear/Embedding (2-D) or SwitchLinear (3-D)
// weights, not yet quantized, and not glm4_moe's MoEGate (it carries a correction bias).
bool quantizable(const Snapshot& s, const std::string& path) {
  const auto& w = s.weights.at(path + ".weight");
  return (w.ndim() == 2 || w.ndim() == 3) && !s.weights.count(path + ".scales") &&
         !s.weights.count(path + ".e_score_correction_bias");
}

std::vector<std::string> module_paths(const Snapshot& s) {
  std::vector<std::string> paths;
  for (const auto& [k, _] : s.weights) {
    const std::string suffix = ".weight";
    if (k.size() > suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) {
      paths.push_back(k.substr(0, k.size() - suffix.size()));
    }
  }
  return paths;
}

void put_quantized(Snapshot& s, const std::string& path, int group, int bits, const std::string& mode) {
  auto& w = s.weights.at(path + ".weight");
  std::vector<mx::array> q;
  try {
    q = mx::quantize(w, group, bits, mode);
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("module '{}' (weight {}): cannot quantize with mode {} bits {} group {}: {}", path,
                                  fmt::join(w.shape(), "x"), mode, bits, group, e.what()));
  }
  w = q[0];
  s.weights.insert_or_assign(path + ".scales", q[1]);
  if (q.size() > 2) s.weights.insert_or_assign(path + ".biases", q[2]);
}

// quantize_model: every quantizable module whose input width the default group divides, with the
// recipe's or the family's per-module settings; returns the modules done (for the bit counts).
std::map<std::string, int> quantize(Snapshot& s, const ConvertFamily& fam, const HfConvertOptions& o, HfConvertReport& r) {
  auto [dgroup, dbits] = mode_defaults(o.mode);
  const int group = o.group_size.value_or(dgroup), bits = o.bits.value_or(dbits);
  const ojson defaults = {{"group_size", group}, {"bits", bits}, {"mode", o.mode}};
  const bool fine_grained = s.config.contains("quantization");
  ojson qcfg = fine_grained ? s.config["quantization"] : defaults;
  auto paths = module_paths(s);
  fam.sort_parameters(paths);
  std::optional<QuantRecipe> recipe;
  if (o.recipe) recipe.emplace(*o.recipe, paths, o.group_size);
  std::map<std::string, int> bits_of;
  for (const auto& p : paths) {
    if (quantizable(s, p) && s.weights.at(p + ".weight").shape(-1) % group == 0) {
      std::optional<ojson> params = recipe ? std::optional<ojson>(recipe->params(p)) : fam.quant_override(p);
      if (params) {
        qcfg[p] = *params;
        const auto& g = (*params)["group_size"];
        const std::string mode = params->value("mode", std::string("affine"));  // to_quantized's default
        put_quantized(s, p, g.is_null() ? mode_defaults(mode).first : g.get<int>(), (*params)["bits"].get<int>(), mode);
        bits_of[p] = (*params)["bits"].get<int>();
      } else {
        if (fine_grained) qcfg[p] = defaults;
        put_quantized(s, p, group, bits, o.mode);
        bits_of[p] = bits;
      }
      ++r.quantized;
    }
  }
  s.config["quantization"] = qcfg;
  s.config["quantization_config"] = qcfg;
  return bits_of;
}

// infer_quant_config for a module the quantization block does not name: the default settings
// when the shapes agree with them, else the bits/group the shapes allow.
QuantSpec infer_spec(const Snapshot& s, const std::string& p, const QuantSpec& dflt) {
  const auto& w = s.weights.at(p + ".weight");
  const auto& scales = s.weights.at(p + ".scales");
  const bool fp = scales.dtype() == mx::uint8;
  auto fits = [&](int bits, int group) {
    const int64_t in = int64_t{w.shape(-1)} * 32;
    return in % bits == 0 && in / bits == int64_t{scales.shape(-1)} * group;
  };
  if (fits(dflt.bits, dflt.group_size) && (dflt.mode != "affine") == fp) return dflt;
  if (fp) {
    for (QuantSpec q : {QuantSpec{16, 4, "nvfp4"}, QuantSpec{32, 4, "mxfp4"}, QuantSpec{32, 8, "mxfp8"}}) {
      if (fits(q.bits, q.group_size)) return q;
    }
  } else {
    for (int bits : {2, 3, 4, 5, 6, 8}) {
      for (int group : {32, 64, 128}) {
        if (fits(bits, group)) return {group, bits, "affine"};
      }
    }
  }
  throw WeightError(fmt::format("tensor '{}.scales': cannot infer the quantization of module '{}'", p, p));
}

void dequantize(Snapshot& s, HfConvertReport& r) {
  const ojson q = s.config.value("quantization", ojson::object());
  QuantSpec dflt{q.value("group_size", 64), q.value("bits", 4), q.value("mode", std::string("affine"))};
  auto paths = module_paths(s);
  for (const auto& p : paths) {
    if (s.weights.count(p + ".scales")) {
      QuantSpec spec = q.contains(p) && q[p].is_object()
                           ? QuantSpec{q[p].value("group_size", 64), q[p].value("bits", 4), q[p].value("mode", std::string("affine"))}
                           : infer_spec(s, p, dflt);
      auto biases = s.weights.count(p + ".biases") ? std::optional<mx::array>(s.weights.at(p + ".biases")) : std::nullopt;
      auto& w = s.weights.at(p + ".weight");
      w = mx::dequantize(w, s.weights.at(p + ".scales"), biases, spec.group_size, spec.bits, spec.mode);
      s.weights.erase(p + ".scales");
      s.weights.erase(p + ".biases");
      ++r.dequantized;
    }
  }
  s.config.erase("quantization");
  s.config.erase("quantization_config");
}

// get_total_parameters: the parameters of leaf modules only (a GatedDeltaNet's own dt_bias and
// A_log are not counted); a quantized module counts weight.size * 32 / bits (+ its bias).
uint64_t total_parameters(const Snapshot& s, const std::map<std::string, int>& bits_of) {
  std::set<std::string> parents;  // modules holding a submodule with parameters
  for (const auto& [k, _] : s.weights) {
    for (std::string m = module_of(module_of(k)); !m.empty(); m = module_of(m)) {
      if (!parents.insert(m).second) break;
    }
  }
  uint64_t n = 0;
  for (const auto& [k, v] : s.weights) {
    const std::string m = module_of(k);
    const std::string leaf = k.substr(m.empty() ? 0 : m.size() + 1);
    auto b = bits_of.find(m);
    if (parents.count(m)) continue;
    if (b == bits_of.end()) {
      n += v.size();
    } else if (leaf == "weight") {
      n += v.size() * 32 / b->second;
    } else if (leaf == "bias") {
      n += v.size();
    }
  }
  return n;
}

// The bits of every module already quantized in the input (kept as it is).
void add_input_quant_bits(const Snapshot& s, std::map<std::string, int>& bits_of) {
  const ojson q = s.config.value("quantization", ojson::object());
  QuantSpec dflt{q.value("group_size", 64), q.value("bits", 4), q.value("mode", std::string("affine"))};
  for (const auto& p : module_paths(s)) {
    if (bits_of.count(p) || !s.weights.count(p + ".scales")) continue;
    bits_of[p] = q.contains(p) && q[p].is_object() ? q[p].value("bits", 4) : infer_spec(s, p, dflt).bits;
  }
}

}  // namespace

HfConvertReport convert_hf(const fs::path& in, const fs::path& out, const HfConvertOptions& o) {
  check_options(o);
  Snapshot s = read_snapshot(in);
  HfConvertReport r;
  r.model_type = s.config["model_type"].get<std::string>();
  const ConvertFamily& fam = ConvertFamily::for_model_type(r.model_type);
  r.order_guessed = !ConvertFamily::known(r.model_type);
  fam.patch_config(s.config);
  if (o.dequantize && !s.config.contains("quantization")) {
    throw ConfigError(fmt::format("--dequantize: {}: no 'quantization' block, nothing to dequantize", (in / "config.json").string()));
  }
  StagingDir staging(out);  // after every input check: a refused conversion leaves nothing behind
  sanitize_weights(s.config, s.weights);
  cast_weights(s, fam, o);
  std::map<std::string, int> bits_of;
  if (o.quantize) bits_of = quantize(s, fam, o, r);
  if (o.dequantize) dequantize(s, r);
  add_input_quant_bits(s, bits_of);

  std::vector<std::string> names;
  for (const auto& [k, _] : s.weights) names.push_back(k);
  fam.sort_parameters(names);
  const uint64_t parameters = total_parameters(s, bits_of);
  NamedArrays ordered;
  for (const auto& n : names) ordered.emplace_back(n, std::move(s.weights.at(n)));
  s.weights.clear();  // the writer holds the only references: each shard freed once written
  r.tensors = ordered.size();
  r.files = write_weights(staging.path(), std::move(ordered), parameters, o.max_shard_bytes, o.progress);
  write_config(staging.path() / "config.json", s.config);
  copy_extras(in, staging.path());
  staging.commit();
  return r;
}

}  // namespace mlxcpp
