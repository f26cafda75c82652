// The ISAs this CPU runs, for kernel tests that compare every one against a reference.
#pragma once

#include <vector>

#include "kernels/cpu_features.h"

namespace mlxcpp::test {

inline std::vector<kernels::Isa> isas() {
  std::vector<kernels::Isa> out;
  for (kernels::Isa i : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512})
    if (kernels::isa_supported(i)) out.push_back(i);
  return out;
}

}  // namespace mlxcpp::test
