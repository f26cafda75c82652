#include "structured_util.h"

#include <map>

#include "test_support.h"

namespace mlxcpp::test {

namespace fs = std::filesystem;

namespace {

fs::path tokenizer_dir(const std::string& name) {
  const fs::path model = source_dir() / "models" / (name == "gemma3" ? "gemma-3-270m-it" : "SmolLM2-135M-Instruct");
  if (fs::exists(model / "tokenizer.json")) return model;
  // SmolLM2 has no @lenml fixture; llama3's is byte-level BPE as well.
  const std::string fixture = name == "gemma3" ? "gemma3" : "llama3";
  return source_dir() / "build" / "fixtures" / "node_modules" / "@lenml" / ("tokenizer-" + fixture) / "models";
}

}  // namespace

const TokenizerUnderTest& structured_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<TokenizerUnderTest>> loaded;  // test-only cache
  auto& slot = loaded[name];
  if (!slot) {
    auto tok = Tokenizer::load(tokenizer_dir(name));
    auto env = std::make_shared<const TokenEnv>(tok, tok.eos_token_ids());
    slot.reset(new TokenizerUnderTest{name, std::move(tok), std::move(env)});
  }
  return *slot;
}

FeedResult feed_text(const Grammar& grammar, const TokenizerUnderTest& t, const std::string& text) {
  auto m = grammar.matcher();
  const auto ids = t.tok.encode(text, false);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!mask_allows(m.compute_mask(), ids[i]))
      return {false, "token " + std::to_string(i) + " (" + std::to_string(ids[i]) + " '" + t.tok.decode({ids[i]}) +
                         "') is not in the mask"};
    if (!m.consume(ids[i])) return {false, "consume: " + m.error().value_or("?")};
  }
  const auto mask = m.compute_mask();
  for (int32_t eos : t.tok.eos_token_ids())
    if (mask_allows(mask, eos)) {
      if (!m.is_accepting()) return {false, "EOS allowed but the matcher is not accepting"};
      return {true, ""};
    }
  return {false, "no EOS allowed at the end"};
}

}  // namespace mlxcpp::test
