#include "nn/fused_attention.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// An attention layer the block kernels cover, with its cache; nullopt where they don't.
struct CoveredAttention {
  KVCache* kv;
  mx::Dtype kv_dtype;  // of the cache's rows: its buffers', or for a new cache the context's choice
  kernels::AttentionBlockArgs args;
  kernels::BlockLinear q, k, v, o;
};

std::optional<CoveredAttention> covered(const mx::array& x, const FusedAttentionLayer& layer, KVCacheBase* cache,
                                        const kernels::FastPath& fast) {
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
  mx::Dtype kv_dtype = fast->kv_f16() ? mx::float16 : mx::float32;
  if (!kv->empty()) {
    auto state = kv->state_to_eval();  // looked at, not kept
    kv_dtype = state[0].dtype();
    if ((state[0].dtype() != mx::float32 && state[0].dtype() != mx::float16) || state[1].dtype() != state[0].dtype() ||
        state[0].shape(0) != x.shape(0) || state[0].shape(1) != layer.kv_heads ||
        state[0].shape(3) != layer.head_dim) {
      return std::nullopt;
    }
  }
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
  return CoveredAttention{kv, kv_dtype, std::move(args), *q, *k, *v, *o};
}

// The cache's buffers grown for L more rows and handed over: the block writes the new rows
// into them itself when nobody else holds them. (MLX's is_donatable cannot tell: the graph and
// the block's sibling outputs hold them too.)
std::pair<mx::array, mx::array> take_cache(CoveredAttention& a, const mx::array& x) {
  a.args.exclusive = a.kv->exclusive();
  return a.kv->take_for_update(x.shape(0), a.args.kv_heads, x.shape(1), a.args.head_dim, a.args.head_dim, a.kv_dtype);
}

}  // namespace

std::optional<mx::array> fused_attention_block(const mx::array& x, const FusedAttentionLayer& layer,
                                               KVCacheBase* cache, const kernels::FastPath& fast) {
  auto a = covered(x, layer, cache, fast);
  if (!a) return std::nullopt;
  auto [kc, vc] = take_cache(*a, x);
  auto out = kernels::attention_block(x, layer.norm_w, a->q, a->k, a->v, a->o, kc, vc, a->args, fast);
  if (!out) {
    a->kv->commit_update(std::move(kc), std::move(vc), 0, a->args.exclusive);  // untouched: give them back
    return std::nullopt;
  }
  a->kv->commit_update((*out)[1], (*out)[2], x.shape(1), true);
  return (*out)[0];
}

std::optional<mx::array> fused_decoder_stack(const mx::array& x, const std::vector<FusedDecoderLayer>& layers,
                                             const std::vector<KVCacheBase*>& caches, const kernels::FastPath& fast) {
  if (layers.empty() || caches.size() != layers.size()) return std::nullopt;
  std::vector<CoveredAttention> attn;
  std::vector<kernels::MlpBlockInputs> mlp;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto a = covered(x, layers[i].attn, caches[i], fast);
    const auto& m = layers[i].mlp;
    auto g = m.gate.block_view(), u = m.up.block_view(), d = m.down.block_view();
    if (!a || !g || !u || !d) return std::nullopt;
    attn.push_back(std::move(*a));
    mlp.push_back({m.norm_w, m.eps, *g, *u, *d, m.act, m.post_norm});
  }
  std::vector<kernels::DecoderLayerInputs> in;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto [kc, vc] = take_cache(attn[i], x);
    in.push_back({{layers[i].attn.norm_w, attn[i].q, attn[i].k, attn[i].v, attn[i].o, kc, vc, attn[i].args}, mlp[i]});
  }
  auto out = kernels::decoder_stack(x, in, fast);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (out) attn[i].kv->commit_update((*out)[1 + 2 * i], (*out)[2 + 2 * i], x.shape(1), true);
    else attn[i].kv->commit_update(in[i].attn.k_cache, in[i].attn.v_cache, 0, attn[i].args.exclusive);
  }
  if (!out) return std::nullopt;
  return (*out)[0];
}

}  // namespace mlxcpp
