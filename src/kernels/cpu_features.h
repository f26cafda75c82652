// Which x86 vector ISA our CPU kernels use: picked at run time from the CPU's features,
// and forcible (tests run every path on one machine).
#pragma once

#include <string>

namespace mlxcpp::kernels {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The widest ISA this CPU supports (AVX-512 needs F+BW+VL; AVX2 needs FMA and F16C too).
Isa best_isa();
bool isa_supported(Isa isa);
// AVX-512 VNNI (vpdpwssd: int16 dot products accumulated into int32).
bool has_avx512_vnni();
const char* isa_name(Isa isa);
// "scalar" | "avx2" | "avx512" | "auto"; throws RequestError otherwise or when unsupported here.
Isa parse_isa(const std::string& name);
// Physical cores available to this process (not hyper-threads).
int physical_cores();

}  // namespace mlxcpp::kernels
