// RAII helpers over the C API of the Rust bridge (bridge/include/mlxcpp_bridge.h), shared by
// tokenizer/ and chat/. Internal: not part of the public API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <mlxcpp_bridge.h>

namespace mlxcpp::bridge {

// Takes ownership of a bridge buffer and returns its bytes.
inline std::string take(MlxcppBuf& buf) {
  std::string s;
  if (buf.data != nullptr) s.assign(reinterpret_cast<const char*>(buf.data), buf.len);
  mlxcpp_buf_free(buf);
  buf = MlxcppBuf{nullptr, 0};
  return s;
}

inline std::vector<int32_t> take(MlxcppIds& ids) {
  std::vector<int32_t> v(ids.data, ids.data + ids.len);
  mlxcpp_ids_free(ids);
  ids = MlxcppIds{nullptr, 0};
  return v;
}

inline const uint8_t* bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// The status of one bridge call: rc plus the message buffer it may fill.
struct Status {
  int rc = MLXCPP_OK;
  MlxcppBuf err{nullptr, 0};
  Status() = default;
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  ~Status() { mlxcpp_buf_free(err); }
  bool ok() const { return rc == MLXCPP_OK; }
  std::string message() { return take(err); }
};

struct TokenizerDeleter {
  void operator()(MlxcppTokenizer* t) const { mlxcpp_tokenizer_free(t); }
};
struct DecodeStreamDeleter {
  void operator()(MlxcppDecodeStream* s) const { mlxcpp_decode_stream_free(s); }
};
struct TemplateDeleter {
  void operator()(MlxcppTemplate* t) const { mlxcpp_template_free(t); }
};
struct TokJsonDeleter {
  void operator()(MlxcppTokJson* h) const { mlxcpp_tokjson_free(h); }
};
using TokenizerHandle = std::unique_ptr<MlxcppTokenizer, TokenizerDeleter>;
using DecodeStreamHandle = std::unique_ptr<MlxcppDecodeStream, DecodeStreamDeleter>;
using TemplateHandle = std::unique_ptr<MlxcppTemplate, TemplateDeleter>;
using TokJsonHandle = std::unique_ptr<MlxcppTokJson, TokJsonDeleter>;

}  // namespace mlxcpp::bridge

namespace mlxcpp::detail {
struct TokenizerImpl;
// The live bridge tokenizer behind a Tokenizer (defined in tokenizer.cpp).
const MlxcppTokenizer* bridge_handle(const TokenizerImpl& impl);
}  // namespace mlxcpp::detail
