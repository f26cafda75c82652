// Structured output through llguidance (Rust bridge): a model's token environment, grammars
// compiled against it (JSON schema, regex, Lark) and one matcher per sequence. Lives beside the
// tokenizer because it is built from the live bridge tokenizer; generate/ applies the masks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct MlxcppTokenEnv;
struct MlxcppGrammar;
struct MlxcppMatcher;

namespace mlxcpp {

class Tokenizer;

enum class GrammarKind { kJsonSchema = 0, kRegex = 1, kLark = 2 };

// JSON whitespace bound used unless asked otherwise (bench/structured --whitespace: greedy and
// sampled outputs of 30 realistic schemas on SmolLM2 and Gemma 3 ended normally with runs of at most
// 13 characters in 90-95% of cases, 15-30 at p99; longer runs were the drift toward max_tokens).
inline constexpr int kDefaultJsonWhitespace = 20;

// What to constrain a generation to: a grammar of `kind` in `text`; json_whitespace >= 0 bounds
// each run of JSON whitespace (0: compact), < 0 leaves it free.
struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonSchema;
  std::string text;
  int json_whitespace = -1;
  bool operator==(const GrammarSpec&) const = default;
};

class Grammar;
class GrammarMatcher;

// The bytes of every token of one model's tokenizer, built once per model (≈ the vocabulary
// walked once). Throws TokenizerError for a tokenizer whose decoder it cannot map.
class TokenEnv {
 public:
  // eos: the ids that end a sequence; vocab_size: the model's logits width (0: the tokenizer's).
  TokenEnv(const Tokenizer& tokenizer, const std::vector<int32_t>& eos, size_t vocab_size = 0);
  ~TokenEnv();
  TokenEnv(const TokenEnv&) = delete;
  TokenEnv& operator=(const TokenEnv&) = delete;

  size_t vocab_size() const { return vocab_size_; }
  size_t mask_words() const { return (vocab_size_ + 31) / 32; }
  // Throws RequestError with llguidance's message when the grammar does not compile.
  Grammar compile(const GrammarSpec& spec) const;

 private:
  std::unique_ptr<MlxcppTokenEnv, void (*)(MlxcppTokenEnv*)> env_;
  size_t vocab_size_ = 0;
};

// A compiled grammar (immutable; share it between threads and sequences).
class Grammar {
 public:
  GrammarMatcher matcher() const;
  size_t mask_words() const { return mask_words_; }

 private:
  friend class TokenEnv;
  Grammar(MlxcppGrammar* g, size_t mask_words);
  std::shared_ptr<MlxcppGrammar> g_;
  size_t mask_words_ = 0;
};

// One sequence's position in a grammar. Not thread-safe: one thread at a time.
class GrammarMatcher {
 public:
  GrammarMatcher(GrammarMatcher&&) noexcept = default;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept = default;
  GrammarMatcher clone() const;

  // Advances over the token; false when the grammar forbids it (the matcher is then in its error
  // state: error() says why, and only EOS is allowed). EOS once stopped is accepted, a no-op.
  bool consume(int32_t id);
  void rollback(size_t n_tokens);
  // Allowed next tokens, bit (i % 32) of words[i / 32] for token i (mask_words() words); EOS is
  // allowed exactly where the grammar accepts. In the error state (a forbidden token, or
  // llguidance failing, e.g. out of lexer fuel: logged) only EOS is, and the call returns false.
  bool compute_mask(uint32_t* words);
  std::vector<uint32_t> compute_mask();
  size_t mask_words() const { return mask_words_; }
  bool is_accepting();
  bool is_stopped() const;
  // Tokens the grammar forces next (not consumed); empty when there is a choice.
  std::vector<int32_t> forced_tokens();
  std::optional<std::string> error() const;

 private:
  friend class Grammar;
  GrammarMatcher(MlxcppMatcher* m, size_t mask_words);
  std::unique_ptr<MlxcppMatcher, void (*)(MlxcppMatcher*)> m_;
  size_t mask_words_ = 0;
};

inline bool mask_allows(const std::vector<uint32_t>& words, int32_t id) {
  auto i = static_cast<size_t>(id);
  return id >= 0 && i / 32 < words.size() && ((words[i / 32] >> (i % 32)) & 1u) != 0;
}

// Compiled grammars by spec, least recently used dropped first (compiling a JSON schema takes
// milliseconds to seconds; clients repeat theirs). Thread-safe.
class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenEnv> env, size_t capacity = 32);
  // Throws RequestError when the grammar does not compile (failures are not cached).
  std::shared_ptr<const Grammar> get(const GrammarSpec& spec);
  const TokenEnv& env() const { return *env_; }

 private:
  struct SpecHash {
    size_t operator()(const GrammarSpec& s) const;
  };
  using Entry = std::pair<GrammarSpec, std::shared_ptr<const Grammar>>;
  std::shared_ptr<const TokenEnv> env_;
  size_t capacity_;
  std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<GrammarSpec, std::list<Entry>::iterator, SpecHash> index_;
};

// A model's GrammarCache whose TokenEnv is built on first use (seconds for a 262k vocabulary),
// so a server that is never asked for structured output does not pay for it. Thread-safe; a
// tokenizer that cannot be mapped throws its TokenizerError on every use.
class LazyGrammarCache {
 public:
  LazyGrammarCache(Tokenizer tokenizer, std::vector<int32_t> eos, size_t vocab_size);
  ~LazyGrammarCache();
  std::shared_ptr<const Grammar> get(const GrammarSpec& spec);

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eos_;
  size_t vocab_size_;
  std::mutex mu_;
  std::unique_ptr<GrammarCache> cache_;
  std::string error_;  // the TokenEnv failure, once tried
};

}  // namespace mlxcpp
