// The server's prompt cache (mlx-lm server.py's LRUPromptCache, as a token trie): KV caches of
// finished requests keyed by their tokens; a new prompt starts from the longest stored prefix.
// Byte-capped LRU. Entries are immutable: fetch hands out copies (clone()) and the stored caches
// stay valid.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/kv_cache.h"

namespace mlxcpp::sched {

class PromptCacheStore {
 public:
  explicit PromptCacheStore(int64_t max_bytes);
  ~PromptCacheStore();
  PromptCacheStore(const PromptCacheStore&) = delete;
  PromptCacheStore& operator=(const PromptCacheStore&) = delete;

  struct Hit {
    LayerCaches caches;     // holds the first `tokens` tokens of the prompt (empty on a miss)
    int tokens = 0;
  };
  // The longest usable prefix of `prompt`, trimmed so at least one prompt token is left to run
  // (at most prompt.size() - 1 tokens). A longer stored entry is trimmed when its caches can be
  // trimmed; a rotating cache that has wrapped is used only where no trim is needed.
  // `kind` keeps caches of different kinds apart (the engine's KV-cache kinds: float, each
  // quantization): a fetch only sees entries inserted with its kind.
  Hit fetch(const std::vector<int>& prompt, int kind = 0);
  // Stores caches that hold exactly `tokens`. Replaces an entry with the same tokens and drops
  // stored entries that are strict prefixes of `tokens` (their content is covered); evicts least
  // recently used entries while over the cap; an entry larger than the cap is not stored.
  void insert(const std::vector<int>& tokens, LayerCaches caches, int kind = 0);
  void clear();

  int64_t bytes() const;
  int64_t max_bytes() const;
  size_t entries() const;
  uint64_t hits() const;    // fetches that returned tokens > 0
  uint64_t misses() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlxcpp::sched
