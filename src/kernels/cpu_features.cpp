#include "kernels/cpu_features.h"

#include <sched.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "core/errors.h"

namespace mlxcpp::kernels {

namespace {

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports has no "f16c"). Asked once: in a VM
// CPUID traps to the hypervisor, and kernels are picked per call (1.5% of a batched decode step
// when it ran every time).
bool has_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  return yes;
}
#endif

}  // namespace

bool isa_supported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

bool has_avx512_vnni() {
#if defined(__x86_64__)
  return isa_supported(Isa::kAvx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  Isa isa;
  if (name == "auto") return best_isa();
  if (name == "scalar") isa = Isa::kScalar;
  else if (name == "avx2") isa = Isa::kAvx2;
  else if (name == "avx512") isa = Isa::kAvx512;
  else throw RequestError("[kernels] unknown ISA '" + name + "' (known: auto, scalar, avx2, avx512)");
  if (!isa_supported(isa)) throw RequestError("[kernels] this CPU does not support '" + name + "'");
  return isa;
}

int physical_cores() {
  // Distinct (physical id, core id) pairs among the CPUs this process may run on.
  cpu_set_t set;
  CPU_ZERO(&set);
  int allowed = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  std::ifstream f("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int processor = -1, phys = 0;
  while (std::getline(f, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("processor", 0) == 0) processor = value();
    else if (line.rfind("physical id", 0) == 0) phys = value();
    else if (line.rfind("core id", 0) == 0 && processor >= 0 && processor < CPU_SETSIZE &&
             (allowed == 0 || CPU_ISSET(processor, &set))) {
      cores.insert({phys, value()});
    }
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = allowed > 0 ? allowed : static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

}  // namespace mlxcpp::kernels
