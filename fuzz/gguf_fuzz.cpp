// libFuzzer target: GGUF header parsing and validation. Any input must either parse or throw an
// mlxcpp::Error; a crash, sanitizer report, hang or other exception is a finding.
#include <cstddef>
#include <cstdint>

#include "artifacts/gguf.h"
#include "core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = mlxcpp::parse_gguf_header(data, size, "fuzz.gguf");
    // Touch every tensor's bytes: the validated ranges must lie inside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : h.tensors) {
      if (t.nbytes > 0) sink = sink ^ data[h.data_offset + t.offset] ^ data[h.data_offset + t.offset + t.nbytes - 1];
    }
  } catch (const mlxcpp::Error&) {
  }
  return 0;
}
