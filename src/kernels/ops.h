// The thin ops layer model code calls. With a KernelContext (fast mode) on a CPU stream it
// builds our primitives; otherwise (parity mode, GPU streams, layouts we don't cover) it
// composes stock MLX ops exactly as mlx-lm does.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "kernels/block_kernels.h"
#include "kernels/kernel_context.h"
#include "kernels/kv_rows.h"

namespace mlxcpp::kernels {

using FastPath = std::shared_ptr<const KernelContext>;

// Whether `fast` applies to the default stream (a CPU stream with a context).
bool use_fast(const FastPath& fast);

// x @ dequantize(w, scales, biases).T (mx.quantized_matmul(transpose=True), affine mode).
mlx::core::array quantized_matmul_t(const mlx::core::array& x, const mlx::core::array& w,
                                    const mlx::core::array& scales,
                                    const std::optional<mlx::core::array>& biases, int group, int bits,
                                    const std::string& mode, const FastPath& fast);

// mx.gather_qmm(x, w, scales, biases, lhs, rhs, transpose=True): the products of a mixture of
// experts, out[i] = x[lhs[i]] @ dequantize(w[rhs[i]]).T with w [E..., n, k*bits/32]; lhs/rhs
// default to every x batch / every expert, broadcast against each other. Our primitive on the
// fast path (affine, float x, bits and group our kernels cover), stock MLX otherwise.
mlx::core::array gather_qmm_t(const mlx::core::array& x, const mlx::core::array& w, const mlx::core::array& scales,
                              const std::optional<mlx::core::array>& biases,
                              const std::optional<mlx::core::array>& lhs, const std::optional<mlx::core::array>& rhs,
                              int group, int bits, const std::string& mode, const FastPath& fast);

// mx.fast.rms_norm(x, w, eps) in one primitive for float32 x and w [d]; nullopt where the fast
// path does not apply.
std::optional<mlx::core::array> rms_norm(const mlx::core::array& x, const mlx::core::array& w, float eps,
                                         const FastPath& fast);

// logits - logsumexp(logits, -1, keepdims=True) (log-probabilities) in one primitive for float32
// logits; nullopt where the fast path does not apply (the caller composes mlx-lm's stock ops).
std::optional<mlx::core::array> log_softmax(const mlx::core::array& logits, const FastPath& fast);
// logits [rows, n] float32 with the tokens not allowed by words [rows, w] uint32 (bit i % 32 of
// word i / 32; w * 32 >= n) set to -inf, in one primitive; nullopt where the fast path does not
// apply (the caller composes stock ops).
std::optional<mlx::core::array> token_mask(const mlx::core::array& logits, const mlx::core::array& words,
                                           const FastPath& fast);
// mx::argmax(x, -1) (uint32, the last axis dropped) through ArgmaxPrimitive: float32, n > 0.
std::optional<mlx::core::array> argmax_last(const mlx::core::array& x, const FastPath& fast);

// The rows of an affine-quantized table at `ids`, dequantized to float32 (a quantized embedding
// lookup: [ids..., d]) in one primitive; nullopt where the fast path does not apply.
std::optional<mlx::core::array> quantized_take(const mlx::core::array& w, const mlx::core::array& scales,
                                               const std::optional<mlx::core::array>& biases,
                                               const mlx::core::array& ids, int group, int bits,
                                               const std::string& mode, const FastPath& fast);

// Scales/biases of an affine layer as our kernels like them: 16-bit ones as they are, float32
// ones as float16 when every value converts exactly (GGUF's f16 block scales), else nullopt
// (keep float32). Evaluates its inputs; for load time.
std::optional<std::pair<mlx::core::array, mlx::core::array>> kernel_scales(const mlx::core::array& scales,
                                                                            const mlx::core::array& biases,
                                                                            const KernelContext& ctx);

// An affine layer's weight, scales and biases in the kRows8 layout (qmatmul.h; as array_access.h's
// is_rows8 describes) where `fast` repacks (KernelContext::repack) and covers the matrix (4 or
// 8 bits, rows a multiple of 8, scales and biases of one type our kernels read); nullopt
// otherwise (keep the arrays). A symmetric matrix (every bias -2^(bits-1) x its scale: GGUF's
// Q4_0 / Q8_0) is repacked without its biases (an empty int8 biases array marks it). For load
// time: evaluates its inputs.
std::optional<std::array<mlx::core::array, 3>> fast_path_layout(const mlx::core::array& w, const mlx::core::array& scales,
                                                                const mlx::core::array& biases, int bits, int group,
                                                                const FastPath& fast);

// A projection as the block primitives take it: affine-quantized, scales/biases float32 or
// both of one 16-bit type.
struct BlockLinear {
  mlx::core::array w, scales, biases;
  std::optional<mlx::core::array> bias;
  int bits, group;
};

// h + down(act(gate(n)) * up(n)), n = rms_norm(h), in one primitive; with post_norm (Gemma 3)
// the down projection's output is RMS-normed with those weights before the residual add.
// nullopt where the fast path does not apply (the caller composes stock ops).
std::optional<mlx::core::array> mlp_block(const mlx::core::array& h, const mlx::core::array& norm_w, float eps,
                                          const BlockLinear& gate, const BlockLinear& up, const BlockLinear& down,
                                          const FastPath& fast, GluActivation act = GluActivation::kSilu,
                                          const std::optional<mlx::core::array>& post_norm = std::nullopt,
                                          float residual_scale = 1.f);

// A quantized KV cache's format (mx.quantize affine: bits 2/4/8, groups of `group` along head_dim).
struct KvQuantFormat {
  int bits, group;
};

struct AttentionBlockArgs {
  int heads, kv_heads, head_dim, offset;
  float eps, scale;
  std::optional<int> window;
  std::shared_ptr<const RopeSpec> rope;
  bool exclusive = false;  // the caches' buffers are the caller's alone: update them in place
  // Gemma 3: RMSNorm (eps) of each head's q and k before rope (weights [head_dim]), and of the
  // o projection's output before the residual add (weights [d]). float32.
  std::optional<mlx::core::array> q_norm = std::nullopt, k_norm = std::nullopt, post_norm = std::nullopt;
  // Gemma 4: RMSNorm (eps) of each head's v before the cache write (weights [head_dim]).
  std::optional<mlx::core::array> v_norm = std::nullopt;
  float residual_scale = 1.f;  // h + o(attn) * residual_scale (MiniCPM)
  bool pre_norm = true;        // false (OLMo 2): no input norm, the projections take h itself
  bool qk_norm_full = false;   // OLMo 2: q_norm/k_norm over all heads at once ([heads * head_dim])
  // Ministral 3: q after RoPE * (1 + beta * log(1 + floor(position / original_max))).
  std::optional<float> llama4_beta = std::nullopt;
  int llama4_original_max = 0;
  // A batch cache's per-row left padding (BatchKVCache: empty = none): row b attends cache rows
  // left_padding[b].. only, and its new tokens take RoPE positions offset - left_padding[b] + l.
  std::vector<int> left_padding = {};
  // A ragged batch instead of cache arrays: the rows' own buffers (RaggedRows: row b's tokens
  // before this block, its new ones at RoPE positions pos[b]..), float16 ones with ragged_f16;
  // `after`: arrays whose computation last wrote those rows (this block runs after them).
  std::shared_ptr<const RaggedRows> ragged = nullptr;
  bool ragged_f16 = false;
  std::vector<mlx::core::array> after = {};
  // The caches hold quantized rows (see AttentionBlockInputs::caches): the block quantizes its
  // new keys and values as mx.quantize does and attends the packed rows.
  std::optional<KvQuantFormat> kv_quant = std::nullopt;
};

// The arrays of one attention block. caches: the key and value caches, [B, kv_heads, cap,
// head_dim] float32 or float16 buffers with cap >= offset + L (see KVCache::take_for_update);
// with args.kv_quant six buffers instead, the keys' packed rows [B, kv_heads, cap, head_dim *
// bits / 32] uint32, scales and biases [B, kv_heads, cap, head_dim / group] (float32 or float16),
// then the values' (QuantizedBlockCache::take_for_update); none for a ragged batch (args.ragged).
struct AttentionBlockInputs {
  mlx::core::array norm_w;
  BlockLinear q, k, v, o;
  std::vector<mlx::core::array> caches;
  AttentionBlockArgs args;
};

// {h + o(attention)[, key cache, value cache]}: norm, q/k/v, rope, cache write at `offset`
// (every batch row's; a ragged row's at its own position), causal attention over the cache, o
// projection, residual. The updated caches come back unless the batch is ragged.
std::optional<std::vector<mlx::core::array>> attention_block(const mlx::core::array& h,
                                                             const AttentionBlockInputs& in, const FastPath& fast);

// One decoder layer for decoder_stack: an attention block (as attention_block's arguments) then
// an MLP block (as mlp_block's).
struct MlpBlockInputs {
  mlx::core::array norm_w;
  float eps;
  BlockLinear gate, up, down;
  GluActivation act = GluActivation::kSilu;
  std::optional<mlx::core::array> post_norm = std::nullopt;
  float residual_scale = 1.f;  // h + mlp * residual_scale (MiniCPM)
  bool pre_norm = true;        // false (OLMo 2): no input norm (norm_w unused)
};
struct DecoderLayerInputs {
  AttentionBlockInputs attn;
  MlpBlockInputs mlp;
};

// {h after every layer, then each non-ragged layer's key and value caches}: what attention_block then
// mlp_block per layer give, in one primitive. nullopt where the fast path does not apply to
// some layer (the caller runs the layers one by one).
std::optional<std::vector<mlx::core::array>> decoder_stack(const mlx::core::array& h,
                                                           const std::vector<DecoderLayerInputs>& layers,
                                                           const FastPath& fast);

}  // namespace mlxcpp::kernels
