// Micro-benchmarks of our CPU kernels on SmolLM2-135M's shapes (Google Benchmark).
//   build/bench/micro/bench_kernels --benchmark_filter=QMatmul
// Reports weight bytes/s (GB/s) so the number compares directly with memory bandwidth.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <mlx/mlx.h>

#include "kernels/block_kernels.h"
#include "kernels/gated_delta.h"
#include "kernels/kernel_context.h"
#include "kernels/qmatmul.h"
#include "kernels/quant_attention.h"

namespace mx = mlx::core;
using namespace mlxcpp::kernels;

namespace {

struct Fixture {
  mx::array x, w, scales, biases;
  int m, n, k, bits, group;
  // float16 scales/biases at group 32: the layout of a GGUF Q4_1/Q8_0 conversion (SmolLM2).
  Fixture(int m_, int n_, int k_, int bits_, int group_)
      : x(mx::random::normal({m_, k_})), w(0), scales(0), biases(0), m(m_), n(n_), k(k_), bits(bits_), group(group_) {
    auto q = mx::quantize(mx::random::normal({n, k}, mx::float32, 0.f, 0.05f), group, bits);
    w = q[0];
    scales = mx::astype(q[1], mx::float16);
    biases = mx::astype(q[2], mx::float16);
    mx::eval({x, w, scales, biases});
  }
  QMatrixView view() const {
    return {w.data<uint32_t>(), scales.data<void>(), biases.data<void>(), n, k, bits, group, ScaleType::kF16};
  }
  // The same matrix in the fast path's kRows8 layout (what a model loads in fast mode).
  QMatrixView rows8_view() {
    if (packed.empty()) {
      packed.resize(static_cast<size_t>(n) * rows8_row_words(k, bits, group, ScaleType::kF16));
      repack_rows8(view(), packed.data());
    }
    return {packed.data(), nullptr, nullptr, n, k, bits, group, ScaleType::kF16, QLayout::kRows8};
  }
  std::vector<uint32_t> packed;
};

void BM_QMatmul(benchmark::State& state) {
  const int m = state.range(0), n = state.range(1), k = state.range(2), bits = state.range(3);
  const auto isa = static_cast<Isa>(state.range(4));
  const int threads = state.range(5);
  const bool rows8 = state.range(6) != 0;
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  Fixture f(m, n, k, bits, 32);
  KernelContext ctx(KernelOptions{isa, threads});
  std::vector<float> out(static_cast<size_t>(m) * n);
  const QMatrixView view = rows8 ? f.rows8_view() : f.view();
  for (auto _ : state) {
    qmatmul(ctx, f.x.data<float>(), m, view, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = f.w.nbytes() + f.scales.nbytes() + f.biases.nbytes();
  state.counters["weight_GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(isa_name(isa)) + (rows8 ? " rows8" : " mlx-layout"));
}

// {m, n, k, bits, isa (1 avx2, 2 avx512), threads, layout (0 MLX's, 1 kRows8)}: decode GEMV on an L2-resident matrix
// (256 rows: the kernel's arithmetic), an L3-resident one (gate/up), on lm_head and on 4x lm_head (larger than L3: streamed from memory, as a whole
// decode step is), a batch of 8 decoding sequences and a prefill GEMM.
BENCHMARK(BM_QMatmul)
    ->ArgsProduct({{1}, {256, 1536, 49152, 196608}, {576}, {4, 8}, {1, 2}, {1, 2}, {0, 1}})
    ->ArgsProduct({{2, 4, 8}, {1536, 49152}, {576}, {4, 8}, {1, 2}, {2}, {0, 1}})
    // Batched decode beyond the 8-row GEMV (continuous batching: 16 and 32 sequences).
    ->ArgsProduct({{16, 32, 64, 128}, {1536, 49152}, {576}, {4, 8}, {2}, {2}, {0, 1}})
    ->ArgsProduct({{128}, {1536}, {576}, {4}, {1, 2}, {1, 2}, {0, 1}})
    // Gemma 3 270M's lm_head (262144 x 640, 8-bit): most of a batched decode step's per-row cost.
    ->ArgsProduct({{1, 2, 4, 8}, {262144}, {640}, {8}, {2}, {2}, {1}})
    // Its 5-bit gate/up (2 x 2048 x 640, 18 layers: 65536 rows) and a 6-bit matrix, both layouts.
    ->ArgsProduct({{1, 8, 16}, {65536}, {640}, {5, 6}, {1, 2}, {2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// A prefill GEMM on Gemma 3 270M's shapes (gate/up 2048 x 640, down 640 x 2048) at its bits;
// {n, k, bits, int_dot (0: dequantized float tiles, 1: int16 activations), isa (1 avx2, 2 avx512),
// threads, prompt rows, layout (0 MLX's, 1 kRows8)}.
void BM_QMatmulPrefill(benchmark::State& state) {
  const int m = state.range(6), n = state.range(0), k = state.range(1), bits = state.range(2);
  const bool rows8 = state.range(7) != 0;
  const auto isa = static_cast<Isa>(state.range(4));
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  Fixture f(m, n, k, bits, 32);
  KernelContext ctx(KernelOptions{isa, static_cast<int>(state.range(5)), false, state.range(3) != 0});
  std::vector<float> out(static_cast<size_t>(m) * n);
  const QMatrixView view = rows8 ? f.rows8_view() : f.view();
  for (auto _ : state) {
    qmatmul(ctx, f.x.data<float>(), m, view, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(1.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(isa_name(isa)) + (qmatmul_int16(ctx, bits, m) ? " int16" : " float") +
                 (rows8 ? " rows8" : " mlx-layout"));
}
BENCHMARK(BM_QMatmulPrefill)
    ->ArgsProduct({{2048}, {640}, {4, 5, 8}, {0, 1}, {1, 2}, {1, 2}, {512}, {0}})
    ->ArgsProduct({{640}, {2048}, {5, 8}, {0, 1}, {1, 2}, {2}, {512}, {0}})
    // A prompt chunk beside running decodes (64-256 tokens): the tile's widening is a larger
    // share; the fast path's kRows8 layout against MLX's.
    ->ArgsProduct({{2048}, {640}, {4, 5, 6, 8}, {1}, {2}, {2}, {64, 256}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// Decode attention (one query row) on SmolLM2's heads (9 query, 3 key/value heads of 64) over a
// cache of `ctx` positions; {ctx, isa (0 scalar, 1 avx2), threads}. The cache is L2-resident
// here (the kernel's arithmetic); in a decode step it comes from memory.
void BM_AttentionDecode(benchmark::State& state) {
  const int ctx_len = state.range(0), heads = 9, kv_heads = 3, hd = 64;
  const auto isa = static_cast<Isa>(state.range(1));
  KernelContext ctx(KernelOptions{isa, static_cast<int>(state.range(2))});
  auto q = mx::random::normal({heads * hd}), kc = mx::random::normal({kv_heads, ctx_len, hd}),
       vc = mx::random::normal({kv_heads, ctx_len, hd});
  mx::eval({q, kc, vc});
  std::vector<float> out(heads * hd);
  AttentionShape s{heads, kv_heads, hd, ctx_len, ctx_len - 1, 1, 0.125f, std::nullopt};
  for (auto _ : state) {
    attention(ctx, s, q.data<float>(), kc.data<float>(), vc.data<float>(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["kv_GB/s"] =
      benchmark::Counter(2.0 * kc.nbytes(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(isa_name(isa));
}
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{32, 128, 512}, {0, 1}, {1, 2}})->Unit(benchmark::kMicrosecond);

// As in a decode step: each layer's cache comes from memory (48 layers' caches, more than L3
// holds, visited in turn); time per layer.
void BM_AttentionDecodeCold(benchmark::State& state) {
  const int ctx_len = state.range(0), heads = 9, kv_heads = 3, hd = 64, layers = 48;
  KernelContext ctx(KernelOptions{best_isa(), static_cast<int>(state.range(1))});
  auto q = mx::random::normal({heads * hd});
  std::vector<mx::array> kc, vc;
  for (int l = 0; l < layers; ++l) {
    kc.push_back(mx::random::normal({kv_heads, ctx_len, hd}));
    vc.push_back(mx::random::normal({kv_heads, ctx_len, hd}));
  }
  mx::eval(q);
  mx::eval(kc);
  mx::eval(vc);
  std::vector<float> out(heads * hd);
  AttentionShape s{heads, kv_heads, hd, ctx_len, ctx_len - 1, 1, 0.125f, std::nullopt};
  int l = 0;
  for (auto _ : state) {
    attention(ctx, s, q.data<float>(), kc[l].data<float>(), vc[l].data<float>(), out.data());
    benchmark::DoNotOptimize(out.data());
    l = (l + 1) % layers;
  }
  state.counters["kv_GB/s"] =
      benchmark::Counter(2.0 * kc[0].nbytes(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(isa_name(best_isa()));
}
BENCHMARK(BM_AttentionDecodeCold)->ArgsProduct({{128, 512, 2048}, {2}})->Unit(benchmark::kMicrosecond);

// A decode step's attention over a float16 cache against an affine-quantized one (mx.quantize,
// group 64, float32 scales: what --kv-bits writes on the fast path) at `ctx` positions, each
// layer's cache from memory (30 layers visited in turn); {ctx, bits (16: float16), heads (0:
// SmolLM2's 9 over 3 of 64, 1: Gemma 3's 4 over 1 of 256)}. Time per layer.
void BM_AttentionDecodeKv(benchmark::State& state) {
  const bool gemma = state.range(2) == 1;  // Gemma 3 270M's heads (4 over 1 kv head of 256), else SmolLM2's
  const int ctx_len = state.range(0), bits = state.range(1), heads = gemma ? 4 : 9, kv_heads = gemma ? 1 : 3,
            hd = gemma ? 256 : 64, layers = 30;
  const int group = 64;
  KernelContext ctx(KernelOptions{best_isa(), 2});
  auto q = mx::random::normal({heads * hd});
  struct Side {
    mx::array w, s, b;
  };
  std::vector<Side> ks, vs;
  for (int l = 0; l < layers; ++l) {
    for (auto* sides : {&ks, &vs}) {
      auto x = mx::random::normal({1, kv_heads, ctx_len, hd});
      if (bits == 16) {
        auto h = mx::astype(x, mx::float16);
        mx::eval(h);
        sides->push_back({h, h, h});
      } else {
        auto t = mx::quantize(x, group, bits);
        // float32 scales, as the fast path's float32 keys give them
        Side sd{t[0], t[1], t[2]};
        mx::eval({sd.w, sd.s, sd.b});
        sides->push_back(sd);
      }
    }
  }
  mx::eval(q);
  std::vector<float> out(heads * hd);
  auto rows = [&](const Side& sd) {
    QuantKvRows r;
    r.w = sd.w.data<uint32_t>();
    r.wj = hd * bits / 32, r.wh = r.wj * ctx_len, r.wb = r.wh * kv_heads;
    r.scales = sd.s.data<void>(), r.biases = sd.b.data<void>();
    r.sj = hd / group, r.sh = r.sj * ctx_len, r.sb = r.sh * kv_heads;
    r.f16 = sd.s.dtype() == mx::float16;
    return r;
  };
  AttentionShape s{heads, kv_heads, hd, ctx_len, ctx_len - 1, 1, 0.125f, std::nullopt, true};
  const long ql = static_cast<long>(heads) * hd;
  QuantAttentionArgs a{1, heads, kv_heads, hd, 1, ctx_len, 0.125f, true, group, bits, 0, {}, ql, hd, ql, ql, hd, ql};
  int l = 0;
  for (auto _ : state) {
    if (bits == 16) attention(ctx, s, q.data<float>(), ks[l].w.data<void>(), vs[l].w.data<void>(), out.data());
    else quant_attention_rows(ctx, a, q.data<float>(), rows(ks[l]), rows(vs[l]), out.data());
    benchmark::DoNotOptimize(out.data());
    l = (l + 1) % layers;
  }
  state.SetLabel(fmt::format("{} {}", gemma ? "gemma3" : "smollm2", bits == 16 ? "f16" : fmt::format("{}-bit", bits)));
}
BENCHMARK(BM_AttentionDecodeKv)->ArgsProduct({{512, 4096}, {16, 8, 4}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace

// The gated-DeltaNet layer core (kernels/gated_delta.h) at Qwen3.5-2B's shapes (16 key and value
// heads of 128, conv kernel 4): S tokens into a fresh state (S = 512: a prefill chunk; 1: decode;
// 8 to 128 around the switch from the per-token recurrence to the chunked one at 16).
// Reports tokens/s; a layer's projections (~100 MB of 4-bit weights per decode step at these
// shapes) dwarf it when it is a few % of the layer.
void BM_GatedDeltaCore(benchmark::State& state) {
  const int S = state.range(0), Hk = 16, Hv = 16, D = 128, K = 4, C = 2 * Hk * D + Hv * D;
  auto ctx = std::make_shared<const KernelContext>();
  auto qkv = mx::random::normal({1, S, C}), z = mx::random::normal({1, S, Hv * D});
  auto b = mx::random::normal({1, S, Hv}), a = mx::random::normal({1, S, Hv});
  auto cs = mx::zeros({1, K - 1, C}), st = mx::zeros({1, Hv, D, D});
  auto w = mx::random::normal({C, K, 1}), a_log = mx::random::normal({Hv}), dt = mx::random::normal({Hv});
  auto nw = mx::ones({D});
  mx::eval({qkv, z, b, a, cs, st, w, a_log, dt, nw});
  for (auto _ : state) {
    auto out = gated_delta_core(qkv, z, b, a, cs, st, w, a_log, dt, nw, std::nullopt, std::nullopt,
                                {Hk, Hv, D, D, K, 1e-6f}, ctx);
    mx::eval({(*out)[0], (*out)[1], (*out)[2]});
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(S) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GatedDeltaCore)->Arg(1)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
