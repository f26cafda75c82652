// mlx-lm's streaming detokenizers (mlx_lm/tokenizer_utils.py), so streamed text equals what
// mlx-lm prints: it picks the class from tokenizer.json's "decoder" (an SPM Sequence with or
// without Strip, ByteLevel, else the naive one that re-decodes the current line). They differ
// from tokenizers' DecodeStream (StreamDecoder) in small ways mlx-lm users see, e.g. the BPE
// one drops the leading space of the first text and decodes invalid UTF-8 Python's way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mlxcpp {

class StreamingDetokenizer {
 public:
  enum class Kind { kNaive, kSpm, kSpmNoTrim, kBpe };

  // mlx-lm's choice for this tokenizer (reads the "decoder" of <dir>/tokenizer.json).
  static Kind kind_for(const Tokenizer& tokenizer);

  explicit StreamingDetokenizer(Tokenizer tokenizer);
  StreamingDetokenizer(Tokenizer tokenizer, Kind kind);

  void reset();
  void add_token(int32_t id);
  // Flushes what is held back waiting for more tokens.
  void finalize();
  // The text added since the previous call (mlx-lm's last_segment).
  std::string last_segment();
  // All text so far (for the naive kind: including the current, still revisable line).
  std::string text();
  const std::vector<int32_t>& tokens() const { return tokens_; }
  Kind kind() const { return kind_; }

 private:
  std::string token_bytes_spm(int32_t id) const;
  std::string bpe_bytes(const std::string& token, bool zero_is_byte) const;
  void spm_flush(bool force);

  Tokenizer tok_;
  Kind kind_;
  bool clean_spaces_ = false;  // naive: the tokenizer's decode removes " ," spaces
  std::vector<int32_t> tokens_;
  std::string text_;       // settled text
  std::string unflushed_;  // spm: raw bytes; bpe: the token strings
  std::vector<int32_t> current_tokens_;  // naive: the tokens of the current line
  std::string current_text_;
  size_t offset_ = 0;
};

// Python's bytes.decode("utf-8", "replace"): each maximal invalid subpart becomes U+FFFD.
std::string utf8_decode_replace(const std::string& bytes);

}  // namespace mlxcpp
