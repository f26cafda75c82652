#include "artifacts/quant_config.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp {

namespace {

QuantSpec parse_spec(const JsonView& v, const std::string& key_for_errors) {
  QuantSpec q;
  q.mode = v.string_or("mode", "affine");
  auto d = default_quant_spec(q.mode);
  if (!d) v.fail("mode", fmt::format("'{}' is not supported (known: affine, mxfp4, nvfp4, mxfp8)", q.mode));
  q.group_size = static_cast<int>(v.int_or("group_size", d->group_size));
  q.bits = static_cast<int>(v.int_or("bits", d->bits));
  check_quant_spec(q, fmt::format("{}: field '{}'", v.file(), key_for_errors));
  return q;
}

}  // namespace

// mlx.nn's per-mode defaults for a missing group_size/bits.
std::optional<QuantSpec> default_quant_spec(const std::string& mode) {
  if (mode == "affine") return QuantSpec{64, 4, mode};
  if (mode == "mxfp4") return QuantSpec{32, 4, mode};
  if (mode == "nvfp4") return QuantSpec{16, 4, mode};
  if (mode == "mxfp8") return QuantSpec{32, 8, mode};
  return std::nullopt;
}

void check_quant_spec(const QuantSpec& q, const std::string& where) {
  bool ok = false;
  if (q.mode == "affine") {
    bool bits_ok = q.bits == 2 || q.bits == 3 || q.bits == 4 || q.bits == 5 || q.bits == 6 || q.bits == 8;
    bool group_ok = q.group_size == 32 || q.group_size == 64 || q.group_size == 128;
    ok = bits_ok && group_ok;
  } else if (q.mode == "mxfp4") {
    ok = q.bits == 4 && q.group_size == 32;
  } else if (q.mode == "nvfp4") {
    ok = q.bits == 4 && q.group_size == 16;
  } else if (q.mode == "mxfp8") {
    ok = q.bits == 8 && q.group_size == 32;
  }
  if (!ok) {
    throw ConfigError(fmt::format(
        "{}: quantization mode '{}' with bits={} group_size={} is not supported (affine: bits "
        "2,3,4,5,6,8 x group 32,64,128; mxfp4: 4/32; nvfp4: 4/16; mxfp8: 8/32)",
        where, q.mode, q.bits, q.group_size));
  }
}

QuantConfig QuantConfig::from_config(const JsonView& config) {
  QuantConfig qc;
  qc.file_ = config.file();
  if (auto block = config.get("quantization")) {
    qc.default_ = parse_spec(*block, "quantization");
    for (const auto& [key, val] : block->node().items()) {
      if (val.is_boolean()) {
        if (!val.get<bool>()) qc.per_path_[key] = std::nullopt;
        else qc.per_path_[key] = qc.default_;
      } else if (val.is_object()) {
        qc.per_path_[key] = parse_spec(block->at(key), "quantization." + key);
      }
    }
    return qc;
  }
  if (auto legacy = config.get("quantization_config")) {
    std::string method = legacy->string_or("quant_method", "");
    if (method == "mxfp4") qc.default_ = QuantSpec{32, 4, "mxfp4"};
    else if (method == "mxfp8") qc.default_ = QuantSpec{32, 8, "mxfp8"};
    else legacy->fail("quant_method", fmt::format("'{}' is not supported (known: mxfp4, mxfp8; "
                                                  "or an MLX 'quantization' block)", method));
  }
  return qc;
}

std::optional<QuantSpec> QuantConfig::for_layer(const std::string& path, int in_dims,
                                                const WeightMap& weights) const {
  if (!default_) return std::nullopt;
  if (auto it = per_path_.find(path); it != per_path_.end()) return it->second;
  const std::string scales_name = path + ".scales";
  if (!weights.has(scales_name)) return std::nullopt;
  // Read bits/group_size off the stored shapes, as mlx-lm's infer_quant_config does.
  const auto& scales = weights.peek(scales_name);
  const auto& w = weights.peek(path + ".weight");
  if (scales.ndim() < 1 || w.ndim() < 1 || scales.shape(-1) == 0 || in_dims == 0) {
    throw WeightError(fmt::format("{}: tensor '{}': has an invalid shape for a quantized layer",
                                  weights.file_of(scales_name), scales_name));
  }
  QuantSpec q;
  q.group_size = in_dims / scales.shape(-1);
  q.bits = static_cast<int>((static_cast<int64_t>(w.shape(-1)) * 32) / in_dims);
  if (scales.dtype() != mlx::core::uint8) {
    q.mode = "affine";
  } else if (q.bits == 4 && q.group_size == 16) {
    q.mode = "nvfp4";
  } else if (q.bits == 4 && q.group_size == 32) {
    q.mode = "mxfp4";
  } else if (q.bits == 8 && q.group_size == 32) {
    q.mode = "mxfp8";
  } else {
    throw WeightError(fmt::format("{}: tensor '{}': cannot infer the quantization mode: {} bits with group size {}",
                                  weights.file_of(scales_name), scales_name, q.bits, q.group_size));
  }
  // Shapes MLX has no kernel for are a fault of the weight file, not of config.json.
  try {
    check_quant_spec(q, fmt::format("{}: tensor '{}'", weights.file_of(scales_name), scales_name));
  } catch (const ConfigError& e) {
    throw WeightError(e.what());
  }
  return q;
}

}  // namespace mlxcpp
