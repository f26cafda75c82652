// Port of mlx_lm/models/cache.py LRUPromptCache + PromptTrie (mlx-lm 0.32.2, used by server.py),
// with this engine's rules: a hit always leaves at least one prompt token to run (an exact entry
// is trimmed by one), recency is refreshed on fetch as well as on insert, and an entry larger
// than the cap is refused instead of flushing the store. See the header for the contract.
#include "scheduler/prompt_cache_store.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cache/prompt_cache.h"
#include "core/errors.h"

namespace mlxcpp::sched {

namespace {

struct Node;

struct Entry {
  LayerCaches caches;
  int64_t nbytes = 0;
  bool trimmable = false;            // fixed: stored caches are never mutated
  std::list<Node*>::iterator lru;    // position in Impl::lru_
};

// One trie node per token; the entry at a node holds the caches of the path's tokens.
struct Node {
  Node* parent = nullptr;
  int token = 0;
  int depth = 0;
  int trimmable_below = 0;  // trimmable entries in this subtree (this node included)
  std::unordered_map<int, std::unique_ptr<Node>> children;
  std::unique_ptr<Entry> entry;
};

// Frees a subtree without recursion: prompts are long, and a recursive chain of unique_ptr
// destructors one node per token would overflow the stack.
void destroy_children(Node& node) {
  std::vector<std::unique_ptr<Node>> stack;
  for (auto& [tok, child] : node.children) stack.push_back(std::move(child));
  node.children.clear();
  while (!stack.empty()) {
    std::unique_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (auto& [tok, child] : n->children) stack.push_back(std::move(child));
    n->children.clear();
  }
}

}  // namespace

struct PromptCacheStore::Impl {
  explicit Impl(int64_t cap) : max_bytes(cap) {}
  ~Impl() { destroy_children(root); }

  mutable std::mutex mu;
  const int64_t max_bytes;
  Node root;
  std::list<Node*> lru;  // front: least recently used
  int64_t bytes = 0;
  size_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;

  static void add_trimmable(Node* n, int delta) {
    for (; n != nullptr; n = n->parent) n->trimmable_below += delta;
  }

  void set_entry(Node* n, LayerCaches caches, int64_t nbytes, bool trimmable) {
    n->entry = std::make_unique<Entry>();
    n->entry->caches = std::move(caches);
    n->entry->nbytes = nbytes;
    n->entry->trimmable = trimmable;
    n->entry->lru = lru.insert(lru.end(), n);
    bytes += nbytes;
    ++entries;
    if (trimmable) add_trimmable(n, 1);
  }

  // Removes n's entry but keeps the node (callers prune when it may have become a dead leaf).
  void drop_entry(Node* n) {
    if (n->entry->trimmable) add_trimmable(n, -1);
    bytes -= n->entry->nbytes;
    --entries;
    lru.erase(n->entry->lru);
    n->entry.reset();
  }

  // The trie of a kind: the root itself for kind 0, else a child of it keyed -kind (token ids
  // are never negative) at depth 0; null where absent and not `create`d.
  Node* kind_root(int kind, bool create) {
    if (kind == 0) return &root;
    if (!create) {
      auto it = root.children.find(-kind);
      return it == root.children.end() ? nullptr : it->second.get();
    }
    auto& child = root.children[-kind];
    if (!child) {
      child = std::make_unique<Node>();
      child->parent = &root;
      child->token = -kind;
    }
    return child.get();
  }

  // Deletes n and its ancestors while they hold neither an entry nor children (PromptTrie.pop);
  // a kind's root (depth 0) stays.
  void prune(Node* n) {
    while (n->depth > 0 && !n->entry && n->children.empty()) {
      Node* parent = n->parent;
      parent->children.erase(n->token);
      n = parent;
    }
  }

  void touch(Node* n) { lru.splice(lru.end(), lru, n->entry->lru); }

  // The shallowest trimmable entry strictly below `from` (mlx-lm's `longer`: the shortest
  // stored sequence extending the matched path). Only subtrees holding one are visited.
  Node* shallowest_trimmable_below(Node* from) const {
    std::vector<Node*> level;
    for (auto& [tok, child] : from->children) {
      if (child->trimmable_below > 0) level.push_back(child.get());
    }
    while (!level.empty()) {
      std::vector<Node*> next;
      for (Node* n : level) {
        if (n->entry && n->entry->trimmable) return n;
        for (auto& [tok, child] : n->children) {
          if (child->trimmable_below > 0) next.push_back(child.get());
        }
      }
      level = std::move(next);
    }
    return nullptr;
  }
};

PromptCacheStore::PromptCacheStore(int64_t max_bytes) {
  if (max_bytes < 0) {
    throw ConfigError("[PromptCacheStore] max_bytes must be >= 0, got " + std::to_string(max_bytes));
  }
  impl_ = std::make_unique<Impl>(max_bytes);
}

PromptCacheStore::~PromptCacheStore() = default;

PromptCacheStore::Hit PromptCacheStore::fetch(const std::vector<int>& prompt, int kind) {
  const int n = static_cast<int>(prompt.size());
  Hit hit;
  int to_trim = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // Walk the prompt: `prefix` is the deepest entry covering at most n - 1 tokens (always usable
    // as is), `exact` the entry holding the whole prompt, `node` the end of the common prefix.
    Node* node = impl_->kind_root(kind, false);
    if (node == nullptr) {
      ++impl_->misses;
      return hit;
    }
    Node* prefix = nullptr;
    Node* exact = nullptr;
    int depth = 0;
    while (depth < n) {
      auto it = node->children.find(prompt[depth]);
      if (it == node->children.end()) break;
      node = it->second.get();
      ++depth;
      if (node->entry) (depth < n ? prefix : exact) = node;
    }
    const int target = std::min(n - 1, depth);  // the most tokens a hit may cover
    Node* use = nullptr;
    if (target > 0) {
      if (prefix != nullptr && prefix->depth == target) {
        use = prefix;  // as long as any trimmed entry would be, and needs no trim
      } else if (exact != nullptr && exact->entry->trimmable) {
        use = exact;
      } else {
        use = impl_->shallowest_trimmable_below(node);
      }
      if (use == nullptr) use = prefix;  // longer entries not trimmable: the next shorter one
    }
    if (use == nullptr) {
      ++impl_->misses;
      return hit;
    }
    hit.tokens = use == prefix ? prefix->depth : target;
    to_trim = use->depth - hit.tokens;
    hit.caches = copy_prompt_cache(use->entry->caches);
    impl_->touch(use);
    ++impl_->hits;
  }
  // The copy is ours alone: trim it outside the lock.
  if (to_trim > 0) trim_prompt_cache(hit.caches, to_trim);
  return hit;
}

void PromptCacheStore::insert(const std::vector<int>& tokens, LayerCaches caches, int kind) {
  const int64_t nbytes = prompt_cache_nbytes(caches);
  const bool trimmable = can_trim_prompt_cache(caches);
  std::lock_guard<std::mutex> lock(impl_->mu);
  // An empty key can never be used (a hit covers at least one token); an entry over the cap
  // would only flush the store and then be evicted itself.
  if (tokens.empty() || nbytes > impl_->max_bytes) return;

  Node* node = impl_->kind_root(kind, true);
  for (int tok : tokens) {
    auto& child = node->children[tok];
    if (!child) {
      child = std::make_unique<Node>();
      child->parent = node;
      child->token = tok;
      child->depth = node->depth + 1;
    }
    node = child.get();
  }
  if (node->entry) impl_->drop_entry(node);
  impl_->set_entry(node, std::move(caches), nbytes, trimmable);

  // A trimmable entry serves every prompt its strict prefixes serve (mlx-lm pop_prefixes);
  // a non-trimmable one (a wrapped rotating cache) does not, so its prefixes stay.
  if (trimmable) {
    for (Node* p = node->parent; p->depth > 0; p = p->parent) {
      if (p->entry) impl_->drop_entry(p);
    }
  }
  // The new entry fits the cap by itself, so it is never the one evicted here.
  while (impl_->bytes > impl_->max_bytes) {
    Node* victim = impl_->lru.front();
    impl_->drop_entry(victim);
    impl_->prune(victim);
  }
}

void PromptCacheStore::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  destroy_children(impl_->root);
  impl_->root.entry.reset();
  impl_->root.trimmable_below = 0;
  impl_->lru.clear();
  impl_->bytes = 0;
  impl_->entries = 0;
}

int64_t PromptCacheStore::bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->bytes;
}

int64_t PromptCacheStore::max_bytes() const { return impl_->max_bytes; }

size_t PromptCacheStore::entries() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->entries;
}

uint64_t PromptCacheStore::hits() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->hits;
}

uint64_t PromptCacheStore::misses() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->misses;
}

}  // namespace mlxcpp::sched
