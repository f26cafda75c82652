// Where a decode step's time goes: graph build (model code creating MLX arrays), MLX dispatch
// (eval minus our kernels), kernel time inside our primitives, and the op count per step.
//   build/bench/decode_breakdown MODEL_DIR [steps] [--parity] [--threads N]
// Steps are run one at a time (no async pipelining) so the phases separate cleanly.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include "cache/quantized_kv_cache.h"
#include "models/model.h"

namespace mx = mlx::core;
using clk = std::chrono::steady_clock;

static int count_ops(const mx::array& out) {
  std::set<std::uintptr_t> seen;
  std::vector<mx::array> stack{out};
  int n = 0;
  while (!stack.empty()) {
    auto a = stack.back();
    stack.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) continue;
    ++n;
    if (std::getenv("OPS")) std::fprintf(stderr, "%s\n", a.primitive().name());
    for (const auto& in : a.inputs()) stack.push_back(in);
  }
  return n;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [steps] [--parity] [--threads N] [--prompt N] [--kv-bits B]\n", argv[0]);
    return 2;
  }
  int steps = 64, prompt_len = 32, kv_bits = 0;
  mlxcpp::ModelOptions opts;
  opts.kernels.profile = true;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--parity")) opts.parity = true;
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) opts.kernels.threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--mlx-layout")) opts.kernels.repack = false;
    else if (!std::strcmp(argv[i], "--prompt") && i + 1 < argc) prompt_len = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kv-bits") && i + 1 < argc) kv_bits = std::atoi(argv[++i]);
    else steps = std::atoi(argv[i]);
  }
  auto loaded = mlxcpp::load_model(argv[1], opts);
  auto& model = *loaded.model;
  auto caches = model.make_cache();
  std::vector<int> prompt(prompt_len);
  for (int i = 0; i < prompt_len; ++i) prompt[i] = 4 + (i * 7919) % (model.vocab_size() - 4);
  std::optional<mx::array> y;
  for (int p0 = 0; p0 < prompt_len; p0 += 512) {  // the prompt in chunks, as generate prefills it
    const int n = std::min(512, prompt_len - p0);
    y = mx::argmax(model(mx::array(prompt.data() + p0, {1, n}, mx::int32), &caches), -1);
    mx::eval(*y);
  }
  if (kv_bits) {  // the caches quantized, and that conversion evaluated by a first step
    mlxcpp::maybe_quantize_kv_cache(caches, mlxcpp::KvQuantization{kv_bits, 64, 0});
    y = mx::argmax(model(mx::slice(*y, {0, y->shape(1) - 1}, {1, y->shape(1)}), &caches), -1);
    mx::eval(*y);
  }
  double build = 0, eval = 0;
  int ops = 0;
  if (loaded.kernels) loaded.kernels->reset_kernel_time();
  for (int s = 0; s < steps; ++s) {
    auto t0 = clk::now();
    auto logits = model(mx::slice(*y, {0, y->shape(1) - 1}, {1, y->shape(1)}), &caches);
    y = mx::argmax(logits, -1);
    auto t1 = clk::now();
    if (s == 0) ops = count_ops(*y);
    auto t2 = clk::now();
    mx::eval(*y);
    auto t3 = clk::now();
    build += std::chrono::duration<double>(t1 - t0).count();
    eval += std::chrono::duration<double>(t3 - t2).count();
  }
  const double kernel = loaded.kernels ? loaded.kernels->kernel_seconds() : 0.0;
  const double per = 1e3 / steps;
  std::printf("mode: %s  steps: %d  ops/step: %d\n", opts.parity ? "parity" : "fast", steps, ops);
  std::printf("per step (ms): total %.3f = graph build %.3f + eval %.3f (our kernels %.3f, MLX dispatch + stock ops %.3f)\n",
              (build + eval) * per, build * per, eval * per, kernel * per, (eval - kernel) * per);
  std::printf("tok/s (sequential, no pipelining): %.1f\n", steps / (build + eval));
  return 0;
}
