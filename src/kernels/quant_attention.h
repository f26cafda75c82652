// Attention over a quantized KV cache (mlx-lm's QuantizedKVCache) on the CPU fast path, reading
// the packed keys and values directly: tiles of 128 rows dequantized into a thread's scratch, the
// ISA's attend_group over each tile, tiles merged as online-softmax parts. The work is split over
// (batch row, kv head, block of queries, key slice) so a decode step uses every thread.
#pragma once

#include <optional>

#include <mlx/array.h>

#include "kernels/ops.h"

namespace mlxcpp::kernels {

// queries [B, Hq, L, D] (float32, before the scale), keys and values as mx.quantize's triples
// ([B, Hkv, S, D * bits / 32] uint32, [B, Hkv, S, D / group] scales and biases, float32 or
// float16) -> [B, Hq, L, D] float32: softmax(scale * q K^T) V per query head (Hq / Hkv heads
// per kv head), query l attending keys 0..S - L + l when `causal` (with `window` > 0 only the
// last `window` of those: a sliding-window layer whose key j sits at position j), all S
// otherwise. nullopt where the fast path does not apply (no fast path, other dtypes or bits,
// uneven heads, a window without causal).
std::optional<mlx::core::array> quantized_kv_attention(const mlx::core::array& queries,
                                                       const mlx::core::array (&keys)[3],
                                                       const mlx::core::array (&values)[3], float scale, bool causal,
                                                       int group_size, int bits, const FastPath& fast, int window = 0);

// The same kernel over a plain float32 cache: keys and values [B, Hkv, S, D] (rows contiguous,
// any batch / head / row strides: a cache's used rows as a view) read tile by tile in place of
// the dequantized ones. What the families whose attention is not a fused block (Qwen3.5's gated
// attention) run on the fast path instead of MLX's CPU attention.
std::optional<mlx::core::array> float_kv_attention(const mlx::core::array& queries, const mlx::core::array& keys,
                                                   const mlx::core::array& values, float scale, bool causal,
                                                   const FastPath& fast);

}  // namespace mlxcpp::kernels
