// Shared by the structured-output tests: the two real tokenizers (SmolLM2's byte-level BPE and
// Gemma 3's byte-fallback SentencePiece) with their token environments, and feeding a text to a
// matcher token by token the way a sampler under the mask would.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/grammar.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::test {

struct TokenizerUnderTest {
  std::string name;
  Tokenizer tok;
  std::shared_ptr<const TokenEnv> env;
};

// "smollm2" or "gemma3": models/<model> when present, else the build/fixtures tokenizer.
const TokenizerUnderTest& structured_tokenizer(const std::string& name);

// Where feeding stopped: accepted (every token in the mask, then an EOS allowed), or why not.
struct FeedResult {
  bool accepted = false;
  std::string why;  // "" when accepted
};

// Encodes `text` with the tokenizer (no special tokens) and feeds it to a fresh matcher.
FeedResult feed_text(const Grammar& grammar, const TokenizerUnderTest& t, const std::string& text);

}  // namespace mlxcpp::test
