// libFuzzer target: safetensors header validation (read_safetensors_header reads a file, so each
// input is written to a per-process file in /dev/shm first). Any input must either parse or
// throw an mlxcpp::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "artifacts/safetensors.h"
#include "core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/mlxcpp-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    auto h = mlxcpp::read_safetensors_header(path);
    for (const auto& t : h.tensors) {
      if (t.end > h.data_size || t.begin > t.end) __builtin_trap();  // validated ranges must hold
    }
  } catch (const mlxcpp::Error&) {
  }
  return 0;
}
