// Byte-level BPE pre-tokenizers by `tokenizer.ggml.pre`. The regex lists are llama.cpp's
// (src/llama-vocab.cpp, llm_tokenizer_bpe): each regex splits the pieces left by the previous
// one, keeping unmatched text as its own piece, which is exactly a HF `Split` with behavior
// "Isolated". Where llama.cpp rewrote a regex for its own engine (no \p{Lu}, no (?i:)), the
// original tokenizer.json regex it quotes is used, since HF's Onig engine supports it.
#include "artifacts/gguf_pretokenizers.h"

#include <map>

namespace mlxcpp {

namespace {

// GPT-2's regex (HF ByteLevel's built-in one); llama.cpp drops the final "|\s+", which changes
// nothing under "Isolated" (unmatched whitespace becomes its own piece either way).
const char* kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
const char* kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* kSeedCoder =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* kBailing =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
const char* kCjk = R"re([一-龥ࠀ-一가-퟿]+)re";

using Table = std::map<std::string, std::vector<std::string>>;

const Table& table() {
  static const Table kTable = [] {
    Table t;
    auto alias = [&t](std::initializer_list<const char*> names, std::vector<std::string> regexes) {
      for (const char* n : names) t[n] = regexes;
    };
    alias({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
           "jina-v5-nano", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe"},
          {kLlama3});
    // Letters written as \u escapes are NFC singletons (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126,
    // U+212A): copied as text they normalize to another code point and break the ranges.
    alias({"deepseek-llm"},
          {R"re([\r\n])re",
           R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-)re" "\u1F7D" R"re(ᾀ-ᾴᾶ-ᾼ)re" "\u1FBE" R"re(ῂ-ῄῆ-ῌῐ-)re" "\u1FD3" R"re(ῖ-)re" "\u1FDB" R"re(ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ)re" "\u2126" R"re(ℨ)re" "\u212A" R"re(-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
           R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", kCjk, R"re(\p{N}+)re"});
    alias({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
          {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
           R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"});
    alias({"deepseek-coder"}, {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjk, R"re(\p{N})re"});
    alias({"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"});
    alias({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
          {R"re(\p{N})re", kGpt2});
    alias({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
           "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-v1-en",
           "jina-v2-code", "roberta-bpe"},
          {kGpt2});
    alias({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
          {kQwen2});
    alias({"qwen35"}, {kQwen35});
    alias({"poro-chat", "bloom", "gpt3-finnish"}, {R"re( ?[^(\s|.,!?…。，、।۔،)]+)re"});
    alias({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o});
    alias({"seed-coder"}, {kSeedCoder});
    alias({"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing});
    // llama.cpp's fallback when a gpt2-model file names no pre-tokenizer.
    alias({"default", ""}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"});
    return t;
  }();
  return kTable;
}

}  // namespace

std::optional<std::vector<std::string>> bpe_pre_tokenizer_regexes(const std::string& pre) {
  auto it = table().find(pre);
  if (it == table().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> known_bpe_pre_tokenizers() {
  std::vector<std::string> out;
  for (const auto& [name, _] : table()) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

}  // namespace mlxcpp
