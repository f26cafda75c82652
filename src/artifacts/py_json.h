// JSON text exactly as Python's json.dump(obj, f, indent=4) writes it (ensure_ascii, floats as
// repr(): 1e-05, 10000.0, 1e+16; no trailing newline), over an insertion-ordered document, so
// config.json and the index file come out byte-identical to mlx-lm's save_config/save_model.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mlxcpp {

// repr() of a Python float (shortest round-trip digits, fixed for 1e-4 <= |x| < 1e16).
std::string python_float_repr(double x);

std::string python_json_dump(const nlohmann::ordered_json& j, int indent = 4);

}  // namespace mlxcpp
