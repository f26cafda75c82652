// Block-level primitives for the CPU fast path: a whole pre-norm attention block (norm, q/k/v,
// rope, cache write, attention, output projection, residual) or MLP block (norm, gate/up,
// SwiGLU, down, residual) in one eval_cpu each, and a whole stack of decoder layers (attention
// block then MLP block, per layer) in one, so a decode step is a handful of MLX ops.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <mlx/primitives.h>

#include "kernels/block_kernels.h"
#include "kernels/kernel_context.h"
#include "kernels/kv_rows.h"

namespace mlxcpp::kernels {

// The arrays a block primitive's specs index: index i < kHeld is inputs[i]; kHeld + j is the
// primitive's own held[j] (evaluated weights it keeps instead of taking them as inputs: MLX
// copies a primitive's input list into each of its outputs and walks it at every eval, which
// for a stack of hundreds of weights and dozens of cache outputs costs more than a layer).
constexpr int kHeld = 1 << 24;
struct BlockArrays {
  const std::vector<mlx::core::array>& in;
  const std::vector<mlx::core::array>& held;
  const mlx::core::array& operator[](int i) const { return i >= kHeld ? held[i - kHeld] : in[i]; }
};

// How a quantized projection's arrays sit among a primitive's arrays: w, scales, biases
// [, bias] starting at `first`.
struct LinearSlot {
  int first = 0;
  int n = 0, k = 0, bits = 0, group = 0;
  bool has_bias = false;
  int inputs() const { return has_bias ? 4 : 3; }
};

// An MLP block's arrays in a primitive's input list: h + post_norm(down(act(gate(n)) * up(n)))
// with n = rms_norm(h, inputs[norm]) (no post_norm when post_norm < 0).
struct MlpBlockSpec {
  int norm = 1;  // input index of the norm weight [d], -1: none (OLMo 2)
  float eps = 0.f;
  std::vector<LinearSlot> slots;  // gate, up, down
  GluActivation act = GluActivation::kSilu;
  int post_norm = -1;  // input index of the post-norm weight [d], -1: none
  float residual_scale = 1.f;  // h + block * residual_scale (MiniCPM)
};

// inputs: h [rows, d], norm_w [d], gate, up, down (LinearSlots) [, post_w [d]]; output: the
// block's (MlpBlockSpec).
class MlpBlockPrimitive : public mlx::core::UnaryPrimitive {
 public:
  MlpBlockPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, MlpBlockSpec spec)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), spec_(std::move(spec)) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppMlpBlock"; }
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  std::shared_ptr<const KernelContext> ctx_;
  MlpBlockSpec spec_;
};

struct AttentionBlockSpec {
  int batch, L, d, heads, kv_heads, head_dim, offset;
  float eps, scale;
  std::optional<int> window;
  std::shared_ptr<const RopeSpec> rope;  // null: no rotary embedding on this layer
  std::vector<LinearSlot> slots = {};     // q, k, v, o
  int norm = 1;                           // input index of the input norm's weight [d], -1: none
  int cache_first;                        // index of the key cache; the value cache follows
  bool exclusive = false;                 // write the caches in place (see AttentionBlockArgs)
  bool kv_f16 = false;                    // the caches hold float16 (else float32)
  int q_norm = -1, k_norm = -1;           // input indices of per-head q/k norm weights (-1: none)
  bool qk_norm_full = false;              // OLMo 2: those norms span all heads ([heads * head_dim])
  int v_norm = -1;                        // input index of a per-head v norm weight (Gemma 4; -1: none)
  std::optional<float> llama4_beta = std::nullopt;  // Ministral 3: q * (1 + beta * log(1 + floor(pos / max)))
  int llama4_original_max = 0;
  int post_norm = -1;                     // input index of the o projection's post-norm weight
  float residual_scale = 1.f;             // h + o(attn) * residual_scale (MiniCPM)
  // A batch cache's rows: row b's first left_padding[b] cache rows are padding (skipped), its
  // new tokens sit at RoPE positions offset - left_padding[b] + l. Empty: no padding.
  std::vector<int> left_padding = {};
  // A ragged batch: the rows' own buffers, which the block grows and writes itself (no cache
  // inputs or outputs then: cache_first and cache_out are -1).
  std::shared_ptr<const RaggedRows> ragged = nullptr;
  int cache_out = -1;  // index of the updated key cache among the outputs; the value cache follows
  // A quantized cache (kv_bits 2/4/8, groups of kv_group, float16 scales and biases with
  // kv_scales_f16): six cache inputs and outputs in place of two, the key's packed rows,
  // scales and biases, then the value's (AttentionBlockInputs::caches).
  int kv_bits = 0, kv_group = 0;
  bool kv_scales_f16 = false;
  int cache_arrays() const { return ragged ? 0 : kv_bits ? 6 : 2; }
};

// inputs: h [B, L, d], norm_w, q, k, v, o (LinearSlots), [q/k/post norm weights,] key cache, value cache
// ([B, kv_heads, cap, head_dim], both float32 or both float16; the new rows go to offset..
// offset + L - 1 of every batch row); outputs: h + o(attn), updated key and value caches
// (the input buffers, updated in place when spec.exclusive says nobody else holds them; else
// copied first and counted in KernelContext::cache_copies). A ragged batch (spec.ragged) has
// no cache inputs or outputs; its inputs may end with arrays the block must run after (the
// last writers of its rows).
class AttentionBlockPrimitive : public mlx::core::Primitive {
 public:
  AttentionBlockPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, AttentionBlockSpec spec)
      : Primitive(s), ctx_(std::move(ctx)), spec_(std::move(spec)) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, std::vector<mlx::core::array>& outputs) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, std::vector<mlx::core::array>& outputs) override;
  const char* name() const override { return "MlxcppAttentionBlock"; }
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override;

 private:
  std::shared_ptr<const KernelContext> ctx_;
  AttentionBlockSpec spec_;
};

// inputs: h [B, L, d], then every layer's arrays where its specs say (inputs or held); outputs: h after all
// layers (each an attention block then an MLP block), then each non-ragged layer's key and
// value caches (as AttentionBlockPrimitive's). One MLX op for a whole decoder stack: MLX's per-op dispatch
// (~10 µs each on this CPU) and graph building leave a decode step.
struct DecoderStackSpec {
  std::vector<AttentionBlockSpec> attn;  // one per layer
  std::vector<MlpBlockSpec> mlp;         // one per layer
  std::vector<mlx::core::array> held;    // see BlockArrays
};

class DecoderStackPrimitive : public mlx::core::Primitive {
 public:
  // The spec is shared with the dispatched work (copying dozens of layer specs per step was a
  // few dozen allocations on the graph-building thread).
  DecoderStackPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx,
                        std::shared_ptr<const DecoderStackSpec> spec)
      : Primitive(s), ctx_(std::move(ctx)), spec_(std::move(spec)) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, std::vector<mlx::core::array>& outputs) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, std::vector<mlx::core::array>& outputs) override;
  const char* name() const override { return "MlxcppDecoderStack"; }
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override;

 private:
  std::shared_ptr<const KernelContext> ctx_;
  std::shared_ptr<const DecoderStackSpec> spec_;
};

}  // namespace mlxcpp::kernels
