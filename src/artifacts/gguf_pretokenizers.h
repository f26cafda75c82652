// The pre-tokenizer regexes of byte-level BPE vocabularies, keyed by `tokenizer.ggml.pre`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mlxcpp {

// The ordered regex list for `pre` ("" = the file names none), or nullopt when unknown.
std::optional<std::vector<std::string>> bpe_pre_tokenizer_regexes(const std::string& pre);
std::vector<std::string> known_bpe_pre_tokenizers();

}  // namespace mlxcpp
