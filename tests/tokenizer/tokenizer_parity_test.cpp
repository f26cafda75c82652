// Differential test: our Tokenizer vs transformers' AutoTokenizer (tools/oracle/tokenizer_goldens.py)
// on every corpus string, for every fixture tokenizer: ids (with/without special tokens), decode,
// decode(skip_special_tokens), the streaming decoder, and the backend pipeline itself.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {
namespace {

using nlohmann::json;

json read_golden(const std::string& name) {
  auto path = test::golden_dir() / "tokenizer" / (name + ".json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + " is missing: run 'make goldens'");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> kCorpus = [] {
    auto path = test::golden_dir() / "tokenizer" / "corpus.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + " is missing: run 'make goldens'");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str())["strings"].get<std::vector<std::string>>();
  }();
  return kCorpus;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n;
  }
  return true;
}

std::string show(const std::string& s) { return json(s).dump(); }

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, MatchesTransformersOnCorpus) {
  json golden = read_golden(GetParam());
  Tokenizer tok = Tokenizer::load(golden["dir"].get<std::string>());
  const auto& strings = corpus();
  const auto& cases = golden["cases"];
  ASSERT_EQ(strings.size(), cases.size());
  ASSERT_GE(strings.size(), 3000u);

  size_t bad = 0, stream_bad = 0, original_bad = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const auto& c = cases[i];
    auto ids = tok.encode(strings[i], true);
    // A tokenizer rebuilt from GGUF: also the ids of the original HF tokenizer, where recorded.
    if (c.contains("ids_original") && ids != c["ids_original"].get<std::vector<int32_t>>() && ++original_bad <= 5) {
      ADD_FAILURE() << GetParam() << " string #" << i << " " << show(strings[i]) << " ids " << json(ids).dump()
                    << " original HF tokenizer " << c["ids_original"].dump();
    }
    auto plain = tok.encode(strings[i], false);
    auto want_ids = c["ids"].get<std::vector<int32_t>>();
    std::string dec = tok.decode(want_ids, false);
    std::string dec_skip = tok.decode(want_ids, true);
    bool ok = ids == want_ids && plain == c["ids_plain"].get<std::vector<int32_t>>() &&
              dec == c["decode"].get<std::string>() && dec_skip == c["decode_skip"].get<std::string>();
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << GetParam() << " string #" << i << " " << show(strings[i]) << "\n ids  " << json(ids).dump()
                    << "\n want " << c["ids"].dump() << "\n plain " << json(plain).dump() << "\n want  "
                    << c["ids_plain"].dump() << "\n decode " << show(dec) << " want " << c["decode"].dump()
                    << "\n skip " << show(dec_skip) << " want " << c["decode_skip"].dump();
    }
    for (bool skip : {false, true}) {
      auto stream = tok.stream_decoder(skip);
      std::string joined;
      bool pieces_ok = true;
      for (int32_t id : want_ids) {
        std::string piece = stream.push(id);
        pieces_ok = pieces_ok && valid_utf8(piece);
        joined += piece;
      }
      if ((!pieces_ok || joined != (skip ? dec_skip : dec)) && ++stream_bad <= 5) {
        ADD_FAILURE() << GetParam() << " stream (skip=" << skip << ") string #" << i << " " << show(strings[i])
                      << "\n joined " << show(joined) << "\n decode " << show(skip ? dec_skip : dec)
                      << (pieces_ok ? "" : "\n a piece was not whole UTF-8 characters");
      }
    }
  }
  EXPECT_EQ(bad, 0u) << GetParam() << ": " << bad << " of " << strings.size() << " strings differ";
  EXPECT_EQ(original_bad, 0u) << GetParam() << ": " << original_bad << " strings encode unlike the original HF tokenizer";
  EXPECT_EQ(stream_bad, 0u) << GetParam() << ": " << stream_bad << " streaming decodes differ";
  RecordProperty("strings", static_cast<int>(strings.size()));
}

TEST_P(TokenizerParity, PipelineAndSpecialTokensMatchTransformers) {
  json golden = read_golden(GetParam());
  Tokenizer tok = Tokenizer::load(golden["dir"].get<std::string>());
  EXPECT_EQ(tok.backend_class(), golden["class"].get<std::string>());
  json ours = json::parse(tok.pipeline_json());
  ours["model"].erase("vocab");
  ours["model"].erase("merges");
  ours.erase("truncation");
  ours.erase("padding");
  const json& want = golden["pipeline"];
  for (const auto& [key, value] : want.items()) {
    EXPECT_EQ(ours[key], value) << GetParam() << ": pipeline field '" << key << "'";
  }
  json map = json::object();
  for (const auto& [k, v] : tok.special_tokens_map()) map[k] = v;
  EXPECT_EQ(map, golden["special_tokens_map"]);
  EXPECT_EQ(tok.vocab_size(true), golden["vocab_size"].get<size_t>());
  if (!golden["eos_token_id"].is_null()) {
    ASSERT_FALSE(tok.eos_token_ids().empty());
    EXPECT_EQ(tok.eos_token_ids()[0], golden["eos_token_id"].get<int32_t>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerParity,
                         ::testing::Values("qwen3", "gemma3", "llama3", "llama3_1", "deepseek_v3", "gptoss", "llama2",
                                           // rebuilt by `mlxcpp convert` from the real models' GGUF
                                           "gguf_smollm2", "gguf_gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mlxcpp
