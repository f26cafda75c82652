// Attention over a quantized KV cache (mlx-lm's QuantizedKVCache) on the CPU fast path, reading
// the packed keys and values directly: a decode step through the ISA's attend_group_q (the packed
// rows themselves: integer dots on the keys, scale-weighted sums on the values); a prompt, or an
// ISA without it, in tiles of 64 rows dequantized into a thread's scratch, the ISA's attend_group
// over each tile, tiles merged as online-softmax parts. The work is split over (batch row, kv
// head, block of queries, key slice) so a decode step uses every thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <mlx/array.h>

#include "kernels/kernel_context.h"
#include "kernels/ops.h"

namespace mlxcpp::kernels {

// The kernel's host side, for the primitives that hold a quantized cache's buffers themselves
// (the fused attention block). One side (keys or values) of the cache: packed uint32 rows at
// element strides wb / wh / wj (batch, head, row) with their scales and biases (float32 or, with
// f16, float16 bit patterns; groups contiguous, rows at strides sb / sh / sj), or with bits 0 a
// plain float32 cache `f` at the w strides.
struct QuantKvRows {
  const uint32_t* w = nullptr;
  long wb = 0, wh = 0, wj = 0;
  const void* scales = nullptr;
  const void* biases = nullptr;
  long sb = 0, sh = 0, sj = 0;
  bool f16 = false;          // scales and biases float16; with bits 0, the rows at f are float16
  const void* f = nullptr;   // float rows (bits 0): float32, or float16 bit patterns with f16
};
struct QuantAttentionArgs {
  int batch, q_heads, kv_heads, head_dim, L;
  int keys;  // rows 0..keys-1 of the cache hold keys; with causal, query l's last is keys - L + l
  float scale;
  bool causal;
  int group, bits;  // bits 0: float rows
  int window = 0;   // > 0: query l also skips keys before its last - window + 1
  std::span<const int> key_start = {};  // per batch row: its keys before key_start[b] are padding
  long qb, qh, ql;  // query strides (floats) of batch, head, position; rows contiguous
  long ob, oh, ol;  // the output's
};
// softmax(scale * q K^T) V per query head (q_heads / kv_heads per kv head); a query with no key
// left after padding attends its own.
void quant_attention_rows(const KernelContext& ctx, const QuantAttentionArgs& a, const float* q, const QuantKvRows& k,
                          const QuantKvRows& v, float* out);

// mx.quantize (affine) of n values: `bits` 2, 4 or 8, groups of `group` -> packed words (n * bits / 32),
// one scale and bias a group, MLX's CPU arithmetic (the packed values use the float32 scale; a
// float16 scale, with scales_f16, is that scale rounded).
void quantize_affine(const float* x, int n, int group, int bits, uint32_t* w, void* scales, void* biases,
                     bool scales_f16);

// queries [B, Hq, L, D] (float32, before the scale), keys and values as mx.quantize's triples
// ([B, Hkv, S, D * bits / 32] uint32, [B, Hkv, S, D / group] scales and biases, float32 or
// float16) -> [B, Hq, L, D] float32: softmax(scale * q K^T) V per query head (Hq / Hkv heads
// per kv head), query l attending keys 0..S - L + l when `causal` (with `window` > 0 only the
// last `window` of those: a sliding-window layer whose key j sits at position j), all S
// otherwise; `key_start` (causal only; one per batch row, its left padding): row b's keys before
// key_start[b] skipped. nullopt where the fast path does not apply (no fast path, other dtypes or
// bits, uneven heads, a window without causal).
std::optional<mlx::core::array> quantized_kv_attention(const mlx::core::array& queries,
                                                       const mlx::core::array (&keys)[3],
                                                       const mlx::core::array (&values)[3], float scale, bool causal,
                                                       int group_size, int bits, const FastPath& fast, int window = 0,
                                                       std::vector<int> key_start = {});

// The same kernel over a plain float cache: keys and values [B, Hkv, S, D], both float32 or both
// float16 (rows contiguous, any batch / head / row strides: a cache's used rows as a view) read
// tile by tile in place of the dequantized ones; `window` as quantized_kv_attention's. What the
// attention that is not a fused block (Qwen3.5's gated attention, Gemma 4's KV-shared layers)
// runs on the fast path instead of MLX's CPU attention.
std::optional<mlx::core::array> float_kv_attention(const mlx::core::array& queries, const mlx::core::array& keys,
                                                   const mlx::core::array& values, float scale, bool causal,
                                                   const FastPath& fast, int window = 0,
                                                   std::vector<int> key_start = {});

}  // namespace mlxcpp::kernels
