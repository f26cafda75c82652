#include "cache/prompt_cache.h"

#include <algorithm>

#include "cache/cache_ops.h"

namespace mlxcpp {

bool can_trim_prompt_cache(const LayerCaches& caches) {
  return std::all_of(caches.begin(), caches.end(), [](const auto& c) { return c->is_trimmable(); });
}

int trim_prompt_cache(LayerCaches& caches, int n) {
  cache_detail::check_trim("trim_prompt_cache", n);
  if (!can_trim_prompt_cache(caches) || caches.empty()) return 0;
  int trimmed = 0;
  for (size_t i = 0; i < caches.size(); ++i) {
    int t = caches[i]->trim(n);
    if (i == 0) trimmed = t;
  }
  return trimmed;
}

int64_t prompt_cache_nbytes(const LayerCaches& caches) {
  int64_t total = 0;
  for (const auto& c : caches) total += c->nbytes();
  return total;
}

LayerCaches copy_prompt_cache(const LayerCaches& caches) {
  LayerCaches out;
  out.reserve(caches.size());
  for (const auto& c : caches) out.push_back(c->clone());
  return out;
}

}  // namespace mlxcpp
