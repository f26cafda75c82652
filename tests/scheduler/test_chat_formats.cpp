// The served model's tool-call format and reasoning markers: a family record's declared chat
// markers decide when the vocabulary holds all of them (Gemma 4), else the chat template and the
// vocabulary do, as mlx-lm infers them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "scheduler/chat_formats.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::sched;
using nlohmann::json;

namespace {

// A word-level tokenizer holding `specials` as added special tokens, with a template that teaches
// no call format (no <|tool_call> in it).
class TinyTokenizer {
 public:
  explicit TinyTokenizer(const std::vector<std::string>& specials) {
    dir_ = fs::temp_directory_path() / ("mlxcpp-chat-formats-" + std::to_string(::getpid()) + "-" + std::to_string(next_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    json vocab = {{"<unk>", 0}, {"hello", 1}};
    json added = json::array();
    for (const auto& s : specials) {
      const int id = static_cast<int>(vocab.size());
      vocab[s] = id;
      added.push_back({{"id", id}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", true}});
    }
    json tok = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
                {"normalizer", nullptr}, {"pre_tokenizer", {{"type", "Whitespace"}}}, {"post_processor", nullptr},
                {"decoder", nullptr}, {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<unk>"}}}};
    std::ofstream(dir_ / "tokenizer.json") << tok.dump();
    json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"unk_token", "<unk>"}, {"chat_template", kTemplate}};
    std::ofstream(dir_ / "tokenizer_config.json") << cfg.dump();
  }
  ~TinyTokenizer() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Tokenizer load() const { return Tokenizer::load(dir_); }

  static constexpr const char* kTemplate = "{% for m in messages %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n{% endfor %}";

 private:
  static inline int next_ = 0;
  fs::path dir_;
};

const FamilyRecord& family(const std::string& model_type) {
  const FamilyRecord* f = find_family(model_type);
  EXPECT_NE(f, nullptr) << model_type;
  return *f;
}

TEST(ChatFormats, Gemma4DeclaresItsChatTokens) {
  for (const char* type : {"gemma4", "gemma4_text"}) {
    const auto& chat = family(type).chat;
    ASSERT_TRUE(chat) << type;
    EXPECT_EQ(chat->tool_call_format, "gemma4");
    EXPECT_EQ(chat->reasoning_start, "<|channel>thought");
    EXPECT_EQ(chat->reasoning_end, "<channel|>");
    for (const char* t : {"<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<|\"|>", "<|think|>", "<|channel>"}) {
      EXPECT_NE(std::find(chat->tokens.begin(), chat->tokens.end(), t), chat->tokens.end()) << type << ": " << t;
    }
  }
  EXPECT_FALSE(family("llama").chat);  // its chat format varies by checkpoint
}

TEST(ChatFormats, DeclaredMarkersDecideWhenTheVocabularyHoldsThem) {
  const auto& gemma4 = family("gemma4");
  TinyTokenizer dir(gemma4.chat->tokens);
  Tokenizer tok = dir.load();
  auto f = choose_chat_formats(&gemma4, tok, TinyTokenizer::kTemplate, "auto");
  EXPECT_TRUE(f.missing_markers.empty());
  EXPECT_EQ(std::string(to_string(f.tool_format)), "gemma4");  // the template alone teaches none
  ASSERT_TRUE(f.reasoning);
  EXPECT_EQ(f.reasoning->start, "<|channel>thought");
  EXPECT_EQ(f.reasoning->end, "<channel|>");
  // Another family on the same tokenizer: only what the template and vocabulary teach.
  auto other = choose_chat_formats(&family("llama"), tok, TinyTokenizer::kTemplate, "auto");
  EXPECT_EQ(other.tool_format, ToolCallFormat::kNone);
  ASSERT_TRUE(other.reasoning);
  EXPECT_EQ(other.reasoning->start, "<|channel>thought");
  // --tool-call-format wins over the record; no template: nothing to parse.
  EXPECT_EQ(choose_chat_formats(&gemma4, tok, TinyTokenizer::kTemplate, "none").tool_format, ToolCallFormat::kNone);
  auto bare = choose_chat_formats(&gemma4, tok, "", "auto");
  EXPECT_EQ(bare.tool_format, ToolCallFormat::kNone);
  EXPECT_FALSE(bare.reasoning);
  EXPECT_THROW(choose_chat_formats(&gemma4, tok, TinyTokenizer::kTemplate, "gemma5"), ConfigError);
}

TEST(ChatFormats, AVocabularyLackingAMarkerFallsBackToTheTemplate) {
  const auto& gemma4 = family("gemma4");
  std::vector<std::string> some;
  for (const auto& t : gemma4.chat->tokens) {
    if (t != "<|tool_call>") some.push_back(t);
  }
  TinyTokenizer dir(some);
  auto f = choose_chat_formats(&gemma4, dir.load(), TinyTokenizer::kTemplate, "auto");
  EXPECT_EQ(f.missing_markers, std::vector<std::string>{"<|tool_call>"});
  EXPECT_EQ(f.tool_format, ToolCallFormat::kNone);
  ASSERT_TRUE(f.reasoning);  // <|channel> and <channel|> are there: mlx-lm's inference finds them
  EXPECT_EQ(f.reasoning->start, "<|channel>thought");
}

// The tiny Gemma 4 chat checkpoint carries Gemma 3's tokenizer: none of Gemma 4's tokens, a
// template without tools or thinking.
TEST(ChatFormats, Gemma4CheckpointWithGemma3Tokenizer) {
  const fs::path dir = test::golden_dir() / "models" / "gemma4-chat-q4g64";
  if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << dir << " is missing: run tools/oracle/tiny_models.py";
  Tokenizer tok = Tokenizer::load(dir);
  const auto& gemma4 = family("gemma4");
  auto f = choose_chat_formats(&gemma4, tok, tok.chat_template(), "auto");
  EXPECT_EQ(f.missing_markers, gemma4.chat->tokens);
  EXPECT_EQ(f.tool_format, ToolCallFormat::kNone);
  EXPECT_FALSE(f.reasoning);
}

}  // namespace
