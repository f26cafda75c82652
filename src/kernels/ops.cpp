#include "kernels/ops.h"

#include <algorithm>

#include <mlx/allocator.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>
#include <mlx/utils.h>
#include <mlx/stream.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/block_primitives.h"
#include "kernels/cpu_features.h"
#include "kernels/primitives.h"
#include "kernels/qmatmul.h"
#include "kernels/scale_load.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

bool use_fast(const FastPath& fast) {
  return fast && mx::default_device() == mx::Device::cpu;
}

mx::array quantized_matmul_t(const mx::array& x, const mx::array& w, const mx::array& scales,
                             const std::optional<mx::array>& biases, int group, int bits, const std::string& mode,
                             const FastPath& fast) {
  const bool ours = use_fast(fast) && mode == "affine" && biases && qmatmul_supported(bits, group) &&
                    kernel_scale_pair(w, scales, *biases) && mx::issubdtype(x.dtype(), mx::floating) &&
                    w.flags().row_contiguous && w.ndim() == 2;
  if (!ours && is_rows8(w, scales)) throw Error(kRows8Stock);
  if (!ours) {
    // 16-bit scales kept for our kernels meet a float32 x here only off the fast path.
    if (mode == "affine" && biases && scales.dtype() != x.dtype() && mx::issubdtype(x.dtype(), mx::floating)) {
      return mx::quantized_matmul(x, w, mx::astype(scales, x.dtype()), mx::astype(*biases, x.dtype()), true, group,
                                  bits, mode);
    }
    return mx::quantized_matmul(x, w, scales, biases, true, group, bits, mode);
  }
  auto shape = x.shape();
  shape.back() = w.shape(0);
  auto s = mx::default_stream(mx::Device::cpu);
  return mx::array(std::move(shape), mx::float32, std::make_shared<QuantizedMatmulPrimitive>(s, fast, bits, group),
                   {x, w, scales, *biases});
}

namespace {

// Whether our gather_qmm primitive covers these operands (else stock MLX, which also reports
// shape errors).
bool gather_ours(const mx::array& x, const mx::array& w, const mx::array& scales, const std::optional<mx::array>& biases,
                 const std::optional<mx::array>& lhs, const std::optional<mx::array>& rhs, int group, int bits,
                 const std::string& mode) {
  if (mode != "affine" || !biases || !qmatmul_supported(bits, group) || !scale_type(scales.dtype()) ||
      scales.dtype() != biases->dtype() || !mx::issubdtype(x.dtype(), mx::floating) || x.ndim() < 2 ||
      w.ndim() < 3 || w.dtype() != mx::uint32 || !w.flags().row_contiguous || w.size() == 0) {
    return false;
  }
  const int k = x.shape(-1);
  mx::Shape sshape(w.shape().begin(), w.shape().end() - 1);
  sshape.push_back(k / group);
  auto integral = [](const std::optional<mx::array>& a) { return !a || index_dtype(a->dtype()); };
  return k % group == 0 && static_cast<long>(w.shape(-1)) * 32 == static_cast<long>(k) * bits &&
         scales.shape() == sshape && biases->shape() == sshape && integral(lhs) && integral(rhs);
}

mx::array batch_arange(const mx::array& a) {
  mx::Shape batch(a.shape().begin(), a.shape().end() - 2);
  int size = 1;
  for (int d : batch) size *= d;
  return mx::reshape(mx::arange(size, mx::int32), batch);
}

}  // namespace

mx::array gather_qmm_t(const mx::array& x, const mx::array& w, const mx::array& scales,
                       const std::optional<mx::array>& biases, const std::optional<mx::array>& lhs,
                       const std::optional<mx::array>& rhs, int group, int bits, const std::string& mode,
                       const FastPath& fast) {
  if (x.size() == 0 && x.ndim() >= 2 && w.ndim() >= 2) {
    // Stock MLX 0.32.4 divides by zero on an empty x (SIGFPE): the (zero) result directly.
    mx::Shape xb(x.shape().begin(), x.shape().end() - 2), wb(w.shape().begin(), w.shape().end() - 2);
    auto shape = mx::broadcast_shapes(lhs ? lhs->shape() : xb, rhs ? rhs->shape() : wb);
    shape.push_back(x.shape(-2));
    shape.push_back(w.shape(-2));
    return mx::zeros(shape, mx::issubdtype(x.dtype(), mx::floating) ? x.dtype() : mx::float32);
  }
  if (!use_fast(fast) || !gather_ours(x, w, scales, biases, lhs, rhs, group, bits, mode)) {
    if (mode == "affine" && biases && scales.dtype() != x.dtype() && mx::issubdtype(x.dtype(), mx::floating)) {
      return mx::gather_qmm(x, w, mx::astype(scales, x.dtype()), mx::astype(*biases, x.dtype()), lhs, rhs, true, group,
                            bits, mode);
    }
    return mx::gather_qmm(x, w, scales, biases, lhs, rhs, true, group, bits, mode);
  }
  auto idx = mx::broadcast_arrays({lhs ? *lhs : batch_arange(x), rhs ? *rhs : batch_arange(w)});
  auto shape = idx[0].shape();
  shape.push_back(x.shape(-2));
  shape.push_back(w.shape(-2));
  auto s = mx::default_stream(mx::Device::cpu);
  return mx::array(std::move(shape), mx::float32, std::make_shared<GatherQmmPrimitive>(s, fast, bits, group),
                   {x, w, scales, *biases, idx[0], idx[1]});
}

std::optional<mx::array> rms_norm(const mx::array& x, const mx::array& w, float eps, const FastPath& fast) {
  if (!use_fast(fast) || x.dtype() != mx::float32 || x.ndim() < 1 || w.dtype() != mx::float32 || w.ndim() != 1 ||
      w.shape(0) != x.shape(-1) || x.size() == 0) {
    return std::nullopt;
  }
  return mx::array(x.shape(), mx::float32,
                   std::make_shared<RmsNormPrimitive>(mx::default_stream(mx::Device::cpu), fast, eps), {x, w});
}

std::optional<mx::array> log_softmax(const mx::array& logits, const FastPath& fast) {
  if (!use_fast(fast) || logits.dtype() != mx::float32 || logits.ndim() < 1 || logits.size() == 0) return std::nullopt;
  return mx::array(logits.shape(), mx::float32,
                   std::make_shared<LogSoftmaxPrimitive>(mx::default_stream(mx::Device::cpu), fast), {logits});
}

std::optional<mx::array> token_mask(const mx::array& logits, const mx::array& words, const FastPath& fast) {
  if (!use_fast(fast) || logits.dtype() != mx::float32 || logits.ndim() != 2 || words.dtype() != mx::uint32 ||
      words.ndim() != 2 || words.shape(0) != logits.shape(0) || static_cast<long>(words.shape(1)) * 32 < logits.shape(1)) {
    return std::nullopt;
  }
  return mx::array(logits.shape(), mx::float32,
                   std::make_shared<TokenMaskPrimitive>(mx::default_stream(mx::Device::cpu)), {logits, words});
}

std::optional<mx::array> argmax_last(const mx::array& x, const FastPath& fast) {
  if (!use_fast(fast) || x.dtype() != mx::float32 || x.ndim() < 1 || x.size() == 0) return std::nullopt;
  auto shape = x.shape();
  shape.pop_back();
  return mx::array(std::move(shape), mx::uint32, std::make_shared<ArgmaxPrimitive>(mx::default_stream(mx::Device::cpu), fast),
                   {x});
}

std::optional<std::pair<mx::array, mx::array>> kernel_scales(const mx::array& scales, const mx::array& biases,
                                                             const KernelContext& ctx) {
  if (scales.dtype() != biases.dtype()) return std::nullopt;
  if (scales.dtype() == mx::float16 || scales.dtype() == mx::bfloat16) return std::make_pair(scales, biases);
  if (scales.dtype() != mx::float32) return std::nullopt;
  // One pass per array (converted and checked together): MLX's astype / array_equal graph
  // took ~85 ms of a SmolLM2 start.
  auto sc = mx::contiguous(scales), bc = mx::contiguous(biases);
  mx::eval({sc, bc});
  const VecOps& v = vec_ops(ctx.isa());
  auto half = [&](const mx::array& a) -> std::optional<mx::array> {
    mx::array h(mx::allocator::malloc(a.size() * sizeof(uint16_t)), a.shape(), mx::float16);
    if (!v.to_half_exact(a.data<float>(), h.data<uint16_t>(), static_cast<long>(a.size()))) return std::nullopt;
    return h;
  };
  auto s16 = half(sc);
  if (!s16) return std::nullopt;
  auto b16 = half(bc);
  if (!b16) return std::nullopt;
  return std::make_pair(*s16, *b16);
}

namespace {

// Whether every bias is -2^(bits-1) x its scale, exactly (GGUF's Q4_0 / Q8_0 converted: a
// symmetric kRows8 matrix stores no biases). Contiguous evaluated arrays; stops at the first
// other value (an mlx_lm.convert checkpoint's first group).
template <ScaleType ST>
struct Symmetric {
  static bool call(const mx::array& scales, const mx::array& biases, int bits) {
    const long n = static_cast<long>(scales.size());
    for (long i = 0; i < n; ++i) {
      if (load_scale<ST>(biases.data<void>(), i) != rows8_sym_bias(bits, load_scale<ST>(scales.data<void>(), i))) {
        return false;
      }
    }
    return n > 0;
  }
};
bool symmetric(const mx::array& scales, const mx::array& biases, int bits, ScaleType st) {
  return with_scale_type<Symmetric>(st, scales, biases, bits);
}

}  // namespace

std::optional<std::array<mx::array, 3>> fast_path_layout(const mx::array& w, const mx::array& scales,
                                                         const mx::array& biases, int bits, int group,
                                                         const FastPath& fast) {
  const auto st = scale_type(scales.dtype());
  if (!fast || !fast->repack() || !st || scales.dtype() != biases.dtype() || w.dtype() != mx::uint32 || w.ndim() != 2 ||
      scales.ndim() != 2 || !rows8_supported(bits, group, w.shape(0))) {
    return std::nullopt;
  }
  // 5/6-bit planes become lane masks in one masked add on AVX-512 (VNNI: the wide kRows8 GEMV);
  // AVX2 spends a broadcast, and, compare and or per plane and half, and there the MLX layout's
  // GEMV stays faster (65536 x 640, 2 threads, one x row: 5-bit 1.26-1.58 vs 1.10-1.12 ms,
  // 6-bit 2.4-2.6 vs 1.1-1.7; AVX-512 5-bit 0.79-0.97 vs 1.12-1.14, 8 rows 3.0-3.8 vs 5.6-7.1).
  if ((bits == 5 || bits == 6) && !(fast->isa() == Isa::kAvx512 && has_avx512_vnni())) return std::nullopt;
  const int n = w.shape(0), k = static_cast<int>(static_cast<long>(w.shape(1)) * 32 / bits);
  if (k % group != 0 || scales.shape() != mx::Shape{n, k / group} || biases.shape() != scales.shape()) return std::nullopt;
  auto wc = mx::contiguous(w), sc = mx::contiguous(scales), bc = mx::contiguous(biases);
  mx::eval({wc, sc, bc});
  // Without biases a row's share of its block's stream must still be whole uint32 words (the
  // array's shape): an odd number of groups of 272 or 144 bytes is not.
  const bool sym = (static_cast<long>(k / group) * rows8_group_bytes(bits, group, *st, true)) % 32 == 0 &&
                   symmetric(sc, bc, bits, *st);
  const mx::Shape shape{n, rows8_row_words(k, bits, group, *st, sym)};
  mx::array packed(mx::allocator::malloc(static_cast<size_t>(n) * shape[1] * sizeof(uint32_t)), shape, mx::uint32);
  const QMatrixView src{wc.data<uint32_t>(), sc.data<void>(), bc.data<void>(), n, k, bits, group, *st};
  // On the pool: Gemma 3's 262k-row embedding alone took ~0.3 s on one thread.
  const int blocks = n / 8, per = std::max(1, blocks / (fast->threads() * 4));
  fast->pool().parallel_for((blocks + per - 1) / per, [&](int t) {
    repack_rows8(src, packed.data<uint32_t>(), t * per, std::min(blocks, (t + 1) * per), sym);
  });
  auto empty = [&](mx::Dtype dt) {
    mx::array e = mx::zeros({0}, dt);
    mx::eval(e);
    return e;
  };
  return std::array<mx::array, 3>{packed, empty(scales.dtype()), empty(sym ? mx::int8 : scales.dtype())};
}

namespace {

// A norm weight the block kernels read in place: float32 [d], contiguous.
bool norm_ok(const mx::array& w, int d) {
  return w.dtype() == mx::float32 && w.ndim() == 1 && w.shape(0) == d && w.flags().row_contiguous;
}

bool block_ok(const BlockLinear& l) {
  return qmatmul_supported(l.bits, l.group) && kernel_scale_pair(l.w, l.scales, l.biases) &&
         l.w.dtype() == mx::uint32 && l.w.ndim() == 2 && l.w.flags().row_contiguous &&
         l.scales.flags().row_contiguous && l.biases.flags().row_contiguous &&
         (!l.bias || (l.bias->dtype() == mx::float32 && l.bias->flags().row_contiguous));
}

// Where a block primitive's arrays go (see BlockArrays): every one into `inputs`, or, with
// `held`, the evaluated ones (weights) there.
struct Placer {
  std::vector<mx::array>& inputs;
  std::vector<mx::array>* held = nullptr;

  // The index of the first of `arrays`, which are placed together.
  int add(std::initializer_list<mx::array> arrays) {
    const bool hold = held && std::all_of(arrays.begin(), arrays.end(), [](const mx::array& a) { return a.is_available(); });
    auto& list = hold ? *held : inputs;
    const int first = (hold ? kHeld : 0) + static_cast<int>(list.size());
    list.insert(list.end(), arrays);
    return first;
  }
  int add_optional(const std::optional<mx::array>& a) { return a ? add({*a}) : -1; }
};

// Places the projection's arrays and describes where they sit.
LinearSlot add_linear(Placer& p, const BlockLinear& l) {
  LinearSlot s;
  s.n = l.w.shape(0);
  s.k = quantized_k(l.w, l.scales, l.biases, l.bits, l.group);
  s.bits = l.bits;
  s.group = l.group;
  s.has_bias = l.bias.has_value();
  s.first = s.has_bias ? p.add({l.w, l.scales, l.biases, *l.bias}) : p.add({l.w, l.scales, l.biases});
  return s;
}

}  // namespace

std::optional<mx::array> quantized_take(const mx::array& w, const mx::array& scales,
                                        const std::optional<mx::array>& biases, const mx::array& ids, int group,
                                        int bits, const std::string& mode, const FastPath& fast) {
  // The table's layout conditions are a block projection's (affine, our bits/groups, one scale type).
  const bool ours = use_fast(fast) && mode == "affine" && biases && block_ok({w, scales, *biases, {}, bits, group}) &&
                    w.shape(0) > 0 &&
                    index_dtype(ids.dtype());
  if (!ours && is_rows8(w, scales)) throw Error(kRows8Stock);
  if (!ours) return std::nullopt;
  auto shape = ids.shape();
  shape.push_back(quantized_k(w, scales, *biases, bits, group));
  return mx::array(std::move(shape), mx::float32,
                   std::make_shared<QuantizedTakePrimitive>(mx::default_stream(mx::Device::cpu), bits, group),
                   {ids, w, scales, *biases});
}

namespace {

bool mlp_ok(const mx::array& h, const MlpBlockInputs& m) {
  return h.dtype() == mx::float32 && (!m.pre_norm || norm_ok(m.norm_w, h.shape(-1))) && block_ok(m.gate) && block_ok(m.up) &&
         block_ok(m.down) && (!m.post_norm || norm_ok(*m.post_norm, h.shape(-1)));
}

MlpBlockSpec add_mlp(Placer& p, const MlpBlockInputs& m) {
  MlpBlockSpec spec;
  spec.norm = m.pre_norm ? p.add({m.norm_w}) : -1;
  spec.eps = m.eps;
  for (const auto* l : {&m.gate, &m.up, &m.down}) spec.slots.push_back(add_linear(p, *l));
  spec.act = m.act;
  spec.post_norm = p.add_optional(m.post_norm);
  spec.residual_scale = m.residual_scale;
  return spec;
}

// Left padding: none, or one per batch row, each within the rows written once this block ran.
bool padding_ok(const mx::array& h, const AttentionBlockArgs& a) {
  if (a.left_padding.empty()) return true;
  const int end = a.offset + h.shape(1);
  return static_cast<int>(a.left_padding.size()) == h.shape(0) &&
         std::all_of(a.left_padding.begin(), a.left_padding.end(), [&](int p) { return p >= 0 && p <= end; });
}

// A quantized cache's six buffers: row-contiguous, [B, kv_heads, cap >= offset + L, ...] each,
// packed rows uint32, scales and biases of one float type.
bool quantized_caches_ok(const mx::array& h, const AttentionBlockInputs& in) {
  const auto& a = in.args;
  const auto [bits, group] = *a.kv_quant;
  if (in.caches.size() != 6 || (bits != 2 && bits != 4 && bits != 8) || group <= 0 || a.head_dim % group != 0 ||
      a.head_dim / group > 16 || (a.head_dim * bits) % 32 != 0) {
    return false;
  }
  const int cap = in.caches[0].shape(2);
  for (int i = 0; i < 6; ++i) {
    const auto& c = in.caches[i];
    const bool packed = i % 3 == 0;
    const int last = packed ? a.head_dim * bits / 32 : a.head_dim / group;
    if (c.ndim() != 4 || c.shape(0) != h.shape(0) || c.shape(1) != a.kv_heads || c.shape(2) != cap ||
        c.shape(3) != last || cap < a.offset + h.shape(1) ||
        c.dtype() != (packed ? mx::uint32 : in.caches[1].dtype())) {
      return false;
    }
  }
  return in.caches[1].dtype() == mx::float32 || in.caches[1].dtype() == mx::float16;
}

// The caches: a pair of buffers covering offset + L rows of every batch row (or a quantized
// cache's six), or a ragged batch's rows (every one laid out for this layer, or not yet).
bool caches_ok(const mx::array& h, const AttentionBlockInputs& in) {
  const auto& a = in.args;
  if (a.ragged) {
    const auto& r = *a.ragged;
    const auto batch = static_cast<size_t>(h.shape(0));
    return in.caches.empty() && !a.kv_quant && a.left_padding.empty() && r.rows.size() == batch && r.pos.size() == batch &&
           std::all_of(r.rows.begin(), r.rows.end(), [&](const auto& row) {
             return row && (!row->laid_out() || (row->kv_heads() == a.kv_heads && row->head_dim() == a.head_dim &&
                                                 row->f16() == a.ragged_f16));
           }) &&
           std::all_of(r.pos.begin(), r.pos.end(), [](int p) { return p >= 0; });
  }
  if (a.kv_quant) return quantized_caches_ok(h, in) && padding_ok(h, a);
  if (in.caches.size() != 2) return false;
  const auto &kc = in.caches[0], &vc = in.caches[1];
  return kc.ndim() == 4 && vc.ndim() == 4 && kc.shape(0) == h.shape(0) && vc.shape(0) == h.shape(0) &&
         kc.shape(2) >= a.offset + h.shape(1) && vc.shape(2) == kc.shape(2) && padding_ok(h, a) &&
         (kc.dtype() == mx::float32 || kc.dtype() == mx::float16) && vc.dtype() == kc.dtype() &&
         kc.shape(3) == a.head_dim && vc.shape(3) == a.head_dim;
}

bool attention_ok(const mx::array& h, const AttentionBlockInputs& in) {
  const auto& a = in.args;
  if (a.llama4_beta && a.llama4_original_max <= 0) return false;
  const int qn = a.qk_norm_full ? a.heads * a.head_dim : a.head_dim;
  const int kn = a.qk_norm_full ? a.kv_heads * a.head_dim : a.head_dim;
  return h.dtype() == mx::float32 && h.ndim() == 3 && caches_ok(h, in) &&
         (!a.pre_norm || norm_ok(in.norm_w, h.shape(2))) && block_ok(in.q) && block_ok(in.k) && block_ok(in.v) &&
         block_ok(in.o) && a.q_norm.has_value() == a.k_norm.has_value() && (!a.q_norm || norm_ok(*a.q_norm, qn)) &&
         (!a.k_norm || norm_ok(*a.k_norm, kn)) && (!a.post_norm || norm_ok(*a.post_norm, h.shape(2))) &&
         (!a.v_norm || norm_ok(*a.v_norm, a.head_dim));
}

// `outputs`: how many outputs the primitive has so far (the block's caches come next).
AttentionBlockSpec add_attention(Placer& p, const mx::array& h, const AttentionBlockInputs& in, int& outputs) {
  const auto& a = in.args;
  AttentionBlockSpec spec{.batch = h.shape(0), .L = h.shape(1), .d = h.shape(2), .heads = a.heads,
                          .kv_heads = a.kv_heads, .head_dim = a.head_dim, .offset = a.offset, .eps = a.eps,
                          .scale = a.scale, .window = a.window, .rope = a.rope, .cache_first = 0,
                          .exclusive = a.exclusive};
  spec.kv_f16 = a.ragged ? a.ragged_f16 : !a.kv_quant && in.caches[0].dtype() == mx::float16;
  if (a.kv_quant) {
    spec.kv_bits = a.kv_quant->bits;
    spec.kv_group = a.kv_quant->group;
    spec.kv_scales_f16 = in.caches[1].dtype() == mx::float16;
  }
  spec.norm = a.pre_norm ? p.add({in.norm_w}) : -1;
  spec.qk_norm_full = a.qk_norm_full;
  spec.llama4_beta = a.llama4_beta;
  spec.llama4_original_max = a.llama4_original_max;
  for (const auto* l : {&in.q, &in.k, &in.v, &in.o}) spec.slots.push_back(add_linear(p, *l));
  spec.q_norm = p.add_optional(a.q_norm);
  spec.k_norm = p.add_optional(a.k_norm);
  spec.v_norm = p.add_optional(a.v_norm);
  spec.post_norm = p.add_optional(a.post_norm);
  spec.residual_scale = a.residual_scale;
  spec.left_padding = a.left_padding;
  if (a.ragged) {
    spec.ragged = a.ragged;
    spec.cache_first = -1;
    // The rows' last writers, once each (the layers of a stack share them), while pending.
    for (const auto& w : a.after) {
      const bool placed =
          std::any_of(p.inputs.begin(), p.inputs.end(), [&](const mx::array& i) { return i.id() == w.id(); });
      if (!w.is_available() && !placed) p.inputs.push_back(w);
    }
    return spec;
  }
  // The caches are inputs (and outputs), together.
  spec.cache_first = static_cast<int>(p.inputs.size());
  for (const auto& c : in.caches) p.inputs.push_back(c);
  spec.cache_out = outputs;
  outputs += static_cast<int>(in.caches.size());
  return spec;
}

void add_cache_outputs(const AttentionBlockInputs& in, std::vector<mx::Shape>& shapes, std::vector<mx::Dtype>& dtypes) {
  if (in.args.ragged) return;
  for (const auto& c : in.caches) {
    shapes.push_back(c.shape());
    dtypes.push_back(c.dtype());
  }
}

}  // namespace

std::optional<mx::array> mlp_block(const mx::array& h, const mx::array& norm_w, float eps, const BlockLinear& gate,
                                   const BlockLinear& up, const BlockLinear& down, const FastPath& fast,
                                   GluActivation act, const std::optional<mx::array>& post_norm,
                                   float residual_scale) {
  MlpBlockInputs m{norm_w, eps, gate, up, down, act, post_norm, residual_scale};
  if (!use_fast(fast) || !mlp_ok(h, m)) return std::nullopt;
  std::vector<mx::array> inputs{h};
  Placer p{inputs};
  auto spec = add_mlp(p, m);
  auto s = mx::default_stream(mx::Device::cpu);
  return mx::array(h.shape(), mx::float32, std::make_shared<MlpBlockPrimitive>(s, fast, std::move(spec)),
                   std::move(inputs));
}

std::optional<std::vector<mx::array>> attention_block(const mx::array& h, const AttentionBlockInputs& in,
                                                      const FastPath& fast) {
  if (!use_fast(fast) || !attention_ok(h, in)) return std::nullopt;
  std::vector<mx::array> inputs{h};
  Placer p{inputs};
  int outputs = 1;
  auto spec = add_attention(p, h, in, outputs);
  std::vector<mx::Shape> shapes{h.shape()};
  std::vector<mx::Dtype> dtypes{mx::float32};
  add_cache_outputs(in, shapes, dtypes);
  auto s = mx::default_stream(mx::Device::cpu);
  return mx::array::make_arrays(std::move(shapes), std::move(dtypes),
                                std::make_shared<AttentionBlockPrimitive>(s, fast, std::move(spec)), std::move(inputs));
}

std::optional<std::vector<mx::array>> decoder_stack(const mx::array& h, const std::vector<DecoderLayerInputs>& layers,
                                                    const FastPath& fast) {
  if (!use_fast(fast) || layers.empty()) return std::nullopt;
  for (const auto& l : layers) {
    if (!attention_ok(h, l.attn) || !mlp_ok(h, l.mlp)) return std::nullopt;
  }
  // MLX gives every output of a primitive its own copy of the inputs and of its siblings, so
  // one primitive costs about outputs x (inputs + outputs) reference counts to build and to
  // detach: with a quantized cache's six arrays a layer, 30 layers in one primitive were
  // ~65k a step (half a millisecond). The layers go in runs of at most kMaxOutputs outputs
  // (15 layers of a float cache's two arrays, 5 of a quantized one's six).
  constexpr int kMaxOutputs = 32;
  auto s = mx::default_stream(mx::Device::cpu);
  std::vector<mx::array> result{h};
  mx::array cur = h;
  for (size_t first = 0; first < layers.size();) {
    std::vector<mx::array> inputs{cur};
    auto spec = std::make_shared<DecoderStackSpec>();
    Placer p{inputs, &spec->held};
    std::vector<mx::Shape> shapes{h.shape()};
    std::vector<mx::Dtype> dtypes{mx::float32};
    int outputs = 1;
    size_t last = first;
    for (; last < layers.size(); ++last) {
      const auto& l = layers[last];
      const int adds = l.attn.args.ragged ? 0 : static_cast<int>(l.attn.caches.size());
      if (last > first && outputs + adds > kMaxOutputs) break;
      spec->attn.push_back(add_attention(p, cur, l.attn, outputs));
      spec->mlp.push_back(add_mlp(p, l.mlp));
      add_cache_outputs(l.attn, shapes, dtypes);
    }
    auto out = mx::array::make_arrays(std::move(shapes), dtypes,
                                      std::make_shared<DecoderStackPrimitive>(s, fast, std::move(spec)),
                                      std::move(inputs));
    cur = out[0];
    result.insert(result.end(), out.begin() + 1, out.end());
    first = last;
  }
  result[0] = cur;
  return result;
}

}  // namespace mlxcpp::kernels
