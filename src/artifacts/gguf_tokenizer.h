// Rebuilds Hugging Face tokenizer files from a GGUF's `tokenizer.ggml.*` metadata:
//   model "gpt2"  -> byte-level BPE (vocab + merges), pre-tokenizer regexes chosen by
//                    `tokenizer.ggml.pre` (the table llama.cpp's llama-vocab.cpp keeps);
//   model "llama" -> SentencePiece-style BPE laid out like HF's LlamaTokenizerFast /
//                    GemmaTokenizerFast: "▁" for spaces, byte fallback, merges derived from the
//                    scores the way transformers' SentencePieceExtractor does.
// Anything else (bert/wpm, t5/ugm, rwkv, ...) is a ConfigError saying it is unsupported.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifacts/gguf.h"

namespace mlxcpp {

struct HfTokenizerFiles {
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizer_config;  // tokenizer_config.json
};

// Token types of `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class GgufTokenType : int { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// tokenizer.ggml.model values we rebuild.
std::vector<std::string> supported_gguf_tokenizer_models();
// tokenizer.ggml.pre values we know a pre-tokenizer for (model gpt2).
std::vector<std::string> supported_gguf_pre_tokenizers();

HfTokenizerFiles build_hf_tokenizer(const GgufFile& gguf);

// Writes tokenizer.json and tokenizer_config.json into `dir`.
void write_hf_tokenizer(const GgufFile& gguf, const std::filesystem::path& dir);

}  // namespace mlxcpp
