// Block-level primitives for the CPU fast path: a whole pre-norm attention block (norm, q/k/v,
// rope, cache write, attention, output projection, residual) or MLP block (norm, gate/up,
// SwiGLU, down, residual) in one eval_cpu each, so a decode step is ~2 MLX ops per layer.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <mlx/primitives.h>

#include "kernels/block_kernels.h"
#include "kernels/kernel_context.h"

namespace mlxcpp::kernels {

// How a quantized projection's arrays sit in a primitive's input list: w, scales, biases
// [, bias] starting at `first`.
struct LinearSlot {
  int first = 0;
  int n = 0, k = 0, bits = 0, group = 0;
  bool has_bias = false;
  int inputs() const { return has_bias ? 4 : 3; }
};

// inputs: h [rows, d], norm_w [d], gate, up, down (LinearSlots) [, post_w [d]]; output:
// h + post_norm(down(act(gate(n)) * up(n))) with n = rms_norm(h) (no post_norm without post_w).
class MlpBlockPrimitive : public mlx::core::UnaryPrimitive {
 public:
  MlpBlockPrimitive(mlx::core::Stream s, std::shared_ptr<const KernelContext> ctx, float eps,
                    std::vector<LinearSlot> slots, GluActivation act, int post_norm)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), eps_(eps), slots_(std::move(slots)), act_(act),
        post_norm_(post_norm) {}
  void eval_cpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs, mlx::core::array& out) override;
  const char* name() const override { return "MlxcppMlpBlock"; }
  std::vector<mlx::core::Shape> output_shapes(const std::vector<mlx::core::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  std::shared_ptr<const KernelContext> ctx_;
  float eps_;
  std::vector<LinearSlot> slots_;  // gate, up, down
  GluActivation act_;
  int post_norm_;  // input index of the post-norm weight, -1: none
};

struct AttentionBlockSpec {
  int batch, L, d, heads, kv_heads, head_dim, offset;
  float eps, scale;
  std::optional<int> window;
  std::shared_ptr<const RopeSpec> rope;  // null: no rotary embedding on this layer
  std::vector<LinearSlot> slots;          // q, k, v, o
  int cache_first;                        // index of the key cache; the value cache follows
  bool exclusive = false;                 // write the caches in place (see AttentionBlockArgs)
  int q_norm = -1, k_norm = -1;           // input indices of per-head q/k norm weights (-1: none)
  int post_norm = -1;                     // input index of the o projection's post-norm weight
};

// inputs: h [B, L, d], norm_w, q, k, v, o (LinearSlots), [q/k/post norm weights,] key cache, value cache
// ([B, kv_heads, cap, head_dim] float32); outputs: h + o(attn), updated key and value caches
// (the input buffers, updated in place when spec.exclusive says nobody else holds them; else
// copied first and counted in KernelContext::cache_copies).
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

}  // namespace mlxcpp::kernels
