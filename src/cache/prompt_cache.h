// Whole-sequence helpers over one cache per layer (mlx_lm/models/cache.py
// can_trim_prompt_cache, trim_prompt_cache).
#pragma once

#include <cstdint>

#include "cache/kv_cache.h"

namespace mlxcpp {

// True when every layer's cache can be trimmed (vacuously true for no layers).
bool can_trim_prompt_cache(const LayerCaches& caches);
// Trims n tokens from every layer if all are trimmable; returns the count the first layer
// trimmed, or 0 when nothing was trimmed. n must be >= 0.
int trim_prompt_cache(LayerCaches& caches, int n);
// Sum of nbytes() over the layers.
int64_t prompt_cache_nbytes(const LayerCaches& caches);
// Independent per-layer copies (clone()), e.g. to store a prefix in a prompt cache.
LayerCaches copy_prompt_cache(const LayerCaches& caches);

}  // namespace mlxcpp
