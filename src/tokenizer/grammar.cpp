#include "tokenizer/grammar.h"

#include <algorithm>
#include <functional>

#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "tokenizer/bridge_util.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

namespace {

const char* kind_name(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonSchema: return "JSON schema";
    case GrammarKind::kRegex: return "regex";
    case GrammarKind::kLark: return "Lark grammar";
  }
  return "grammar";
}

}  // namespace

TokenEnv::TokenEnv(const Tokenizer& tokenizer, const std::vector<int32_t>& eos, size_t vocab_size)
    : env_(nullptr, mlxcpp_token_env_free) {
  std::vector<uint32_t> ids(eos.begin(), eos.end());
  bridge::Status st;
  MlxcppTokenEnv* env = nullptr;
  st.rc = mlxcpp_token_env_new(detail::bridge_handle(*tokenizer.impl_), ids.data(), ids.size(), vocab_size,
                               &env, &st.err);
  if (!st.ok()) throw TokenizerError(tokenizer.dir().string() + "/tokenizer.json: " + st.message());
  env_.reset(env);
  vocab_size_ = mlxcpp_token_env_vocab_size(env);
}

TokenEnv::~TokenEnv() = default;

Grammar TokenEnv::compile(const GrammarSpec& spec) const {
  bridge::Status st;
  MlxcppGrammar* g = nullptr;
  st.rc = mlxcpp_grammar_compile(env_.get(), static_cast<int>(spec.kind), bridge::bytes(spec.text),
                                 spec.text.size(), spec.json_whitespace, &g, &st.err);
  if (!st.ok()) throw RequestError(std::string("[grammar] ") + kind_name(spec.kind) + ": " + st.message());
  return Grammar(g, mask_words());
}

Grammar::Grammar(MlxcppGrammar* g, size_t mask_words) : g_(g, mlxcpp_grammar_free), mask_words_(mask_words) {}

GrammarMatcher Grammar::matcher() const { return GrammarMatcher(mlxcpp_matcher_new(g_.get()), mask_words_); }

GrammarMatcher::GrammarMatcher(MlxcppMatcher* m, size_t mask_words)
    : m_(m, mlxcpp_matcher_free), mask_words_(mask_words) {}

GrammarMatcher GrammarMatcher::clone() const { return GrammarMatcher(mlxcpp_matcher_clone(m_.get()), mask_words_); }

bool GrammarMatcher::consume(int32_t id) {
  auto tok = static_cast<uint32_t>(id);
  bridge::Status st;
  st.rc = mlxcpp_matcher_consume(m_.get(), &tok, 1, &st.err);
  return st.ok();
}

void GrammarMatcher::rollback(size_t n_tokens) {
  bridge::Status st;
  st.rc = mlxcpp_matcher_rollback(m_.get(), n_tokens, &st.err);
  if (!st.ok()) throw RequestError("[grammar] rollback of " + std::to_string(n_tokens) + " tokens: " + st.message());
}

bool GrammarMatcher::compute_mask(uint32_t* words) {
  bridge::Status st;
  st.rc = mlxcpp_matcher_compute_mask(m_.get(), words, mask_words_, &st.err);
  // The bridge left only EOS allowed: the sequence ends short of the grammar rather than unconstrained.
  if (!st.ok()) spdlog::warn("[grammar] no mask ({}); only EOS is allowed", st.message());
  return st.ok();
}

std::vector<uint32_t> GrammarMatcher::compute_mask() {
  std::vector<uint32_t> words(mask_words_);
  compute_mask(words.data());
  return words;
}

bool GrammarMatcher::is_accepting() { return mlxcpp_matcher_is_accepting(m_.get()) == 1; }

bool GrammarMatcher::is_stopped() const { return mlxcpp_matcher_is_stopped(m_.get()) != 0; }

std::vector<int32_t> GrammarMatcher::forced_tokens() {
  bridge::Status st;
  MlxcppIds ids{nullptr, 0};
  st.rc = mlxcpp_matcher_ff_tokens(m_.get(), &ids, &st.err);
  if (!st.ok()) return {};
  return bridge::take(ids);
}

std::optional<std::string> GrammarMatcher::error() const {
  MlxcppBuf msg{nullptr, 0};
  if (mlxcpp_matcher_error(m_.get(), &msg) != 1) return std::nullopt;
  return bridge::take(msg);
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenEnv> env, size_t capacity)
    : env_(std::move(env)), capacity_(capacity == 0 ? 1 : capacity) {}

size_t GrammarCache::SpecHash::operator()(const GrammarSpec& s) const {
  return std::hash<std::string>{}(s.text) ^ (static_cast<size_t>(s.kind) * 0x9e3779b97f4a7c15ull) ^
         (static_cast<size_t>(s.json_whitespace + 1) << 17);
}

std::shared_ptr<const Grammar> GrammarCache::get(const GrammarSpec& spec) {
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(spec); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: a slow schema does not hold up other requests' look-ups.
  auto grammar = std::make_shared<const Grammar>(env_->compile(spec));
  std::lock_guard lock(mu_);
  if (auto it = index_.find(spec); it != index_.end()) return it->second->second;
  lru_.emplace_front(spec, grammar);
  index_[spec] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return grammar;
}

LazyGrammarCache::LazyGrammarCache(Tokenizer tokenizer, std::vector<int32_t> eos, size_t vocab_size)
    : tokenizer_(std::make_unique<Tokenizer>(std::move(tokenizer))), eos_(std::move(eos)), vocab_size_(vocab_size) {}

LazyGrammarCache::~LazyGrammarCache() = default;

std::shared_ptr<const Grammar> LazyGrammarCache::get(const GrammarSpec& spec) {
  GrammarCache* cache = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!cache_ && error_.empty()) {
      try {
        cache_ = std::make_unique<GrammarCache>(std::make_shared<const TokenEnv>(*tokenizer_, eos_, vocab_size_));
      } catch (const TokenizerError& e) {
        error_ = e.what();
      }
    }
    if (!cache_) throw TokenizerError(error_);
    cache = cache_.get();
  }
  return cache->get(spec);  // GrammarCache has its own lock; cache_ is never reset
}

}  // namespace mlxcpp
