// transformers (v5) does not use tokenizer.json as-is: AutoTokenizer picks a class from
// tokenizer_config.json, and some classes rebuild the pipeline around the file's vocab/merges
// (LlamaTokenizer: Metaspace; GemmaTokenizer; Qwen2Tokenizer), then adds the config's
// added/special tokens. This reproduces that, so our ids equal what mlx-lm (through
// transformers) gets. Port of transformers 5.24 tokenization_utils_tokenizers.py and the
// models/{llama,gemma,qwen2}/tokenization_*.py constructors.
// Not reproduced (yet): other classes whose __init__ rebuilds the backend (they load the file
// as-is), the class choice from config.json's model_type, split_special_tokens=true (an error),
// and the Mistral regex patch. tests/tokenizer compares the whole resulting pipeline with
// transformers' backend for every fixture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_config.h"

namespace mlxcpp {

struct EffectiveTokenizer {
  nlohmann::json json;                  // the tokenizer.json skeleton to hand to the bridge
  std::string backend_class;            // "TokenizersBackend", "LlamaTokenizer", ...
  // transformers' special_tokens_map: named special tokens that are set (name -> content).
  std::vector<std::pair<std::string, std::string>> special_tokens_map;
  std::vector<std::string> all_special_tokens;  // named + extra special tokens
};

// tokenizer.json's model.vocab, read-only. It stays in the bridge (it is most of the file) and
// only its size and a few ids are needed here.
class VocabLookup {
 public:
  virtual ~VocabLookup() = default;
  // nullopt when the model has no "vocab"; else its entries (what new added ids start from).
  virtual std::optional<int64_t> size() const = 0;
  virtual std::optional<int64_t> id(const std::string& token) const = 0;
};

// `skeleton` is tokenizer.json without model.vocab and model.merges (see VocabLookup); the
// result's .json is the effective skeleton, to which the bridge adds the file's vocab and merges
// back (the file's merges win over the empty list a rebuilt BPE gains). `file` names it in errors.
EffectiveTokenizer effective_tokenizer(nlohmann::json skeleton, const VocabLookup& vocab, const TokenizerConfig& cfg,
                                       const std::string& file);

}  // namespace mlxcpp
