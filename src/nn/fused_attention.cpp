#include "nn/fused_attention.h"

namespace mx = mlx::core;

namespace mlxcpp {

std::optional<mx::array> fused_attention_block(const mx::array& x, const FusedAttentionLayer& layer,
                                               KVCacheBase* cache, const kernels::FastPath& fast) {
  // Only a plain KVCache: its mask is causal (or none for one token) or, for a sliding-window
  // layer, causal within the window; the kernel applies either.
  auto* kv = dynamic_cast<KVCache*>(cache);
  if (!kernels::use_fast(fast) || kv == nullptr || x.dtype() != mx::float32 || x.ndim() != 3) return std::nullopt;
  std::shared_ptr<const kernels::RopeSpec> rope;
  if (layer.rope) {
    rope = layer.rope->kernel_spec();
    if (!rope) return std::nullopt;
  }
  auto q = layer.q.block_view(), k = layer.k.block_view(), v = layer.v.block_view(), o = layer.o.block_view();
  if (!q || !k || !v || !o) return std::nullopt;
  const int batch = x.shape(0), L = x.shape(1);
  kernels::AttentionBlockArgs args{.heads = layer.heads,
                                   .kv_heads = layer.kv_heads,
                                   .head_dim = layer.head_dim,
                                   .offset = kv->offset(),
                                   .eps = layer.eps,
                                   .scale = layer.scale,
                                   .window = layer.window,
                                   .rope = std::move(rope)};
  args.q_norm = layer.q_norm;
  args.k_norm = layer.k_norm;
  args.post_norm = layer.post_norm;
  if (!kv->empty()) {
    auto state = kv->state_to_eval();  // looked at, not kept
    if (state[0].dtype() != mx::float32 || state[0].shape(0) != batch || state[0].shape(1) != layer.kv_heads ||
        state[0].shape(3) != layer.head_dim) {
      return std::nullopt;
    }
  }
  auto [kc, vc] = kv->take_for_update(batch, layer.kv_heads, L, layer.head_dim, layer.head_dim, mx::float32);
  // The block writes the new rows into the buffers themselves when nobody else holds them.
  // (MLX's is_donatable cannot tell: the graph and the block's sibling outputs hold them too.)
  args.exclusive = kv->exclusive();
  auto out = kernels::attention_block(x, layer.norm_w, *q, *k, *v, *o, kc, vc, args, fast);
  if (!out) {
    kv->commit_update(std::move(kc), std::move(vc), 0, args.exclusive);  // untouched: give them back
    return std::nullopt;
  }
  kv->commit_update((*out)[1], (*out)[2], L, true);
  return (*out)[0];
}

}  // namespace mlxcpp
