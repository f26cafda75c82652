// What a batched decode step costs against the batch size: B rows (each after its own prompt,
// prefilled alone, merged into batch caches as the scheduler does) decode one token per step
// in one forward pass; the goal is B rows costing far less than B single steps.
//   build/bench/batch_decode MODEL_DIR [--prompt N] [--steps N] [--threads N] [--batches 1,2,4,...] [--parity]
// Steps run one at a time (each evaluated before the next is built). "B=1 solo" is the
// single-sequence path (plain KVCache) that single-request decode uses today.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <mlx/mlx.h>

#include "cache/batch_kv_cache.h"
#include "kernels/ops.h"
#include "models/model.h"

namespace mx = mlx::core;
using clk = std::chrono::steady_clock;

namespace {

struct Options {
  std::string dir;
  int prompt = 128, steps = 32, warmup = 3;
  std::vector<int> batches{1, 2, 4, 8, 16, 32};
  mlxcpp::ModelOptions model;
};

Options parse(int argc, char** argv) {
  Options o;
  o.dir = argv[1];
  o.model.kernels.profile = true;
  for (int i = 2; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--prompt")) o.prompt = std::atoi(next());
    else if (!std::strcmp(argv[i], "--steps")) o.steps = std::atoi(next());
    else if (!std::strcmp(argv[i], "--threads")) o.model.kernels.threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--parity")) o.model.parity = true;
    else if (!std::strcmp(argv[i], "--batches")) {
      o.batches.clear();
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) o.batches.push_back(std::stoi(t));
    }
  }
  return o;
}

// A prompt of n ids, different per row.
std::vector<int> prompt_ids(int n, int row, int vocab) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = 4 + (row * 104729 + i * 7919) % (vocab - 4);
  return t;
}

// The rows' caches, each prompt prefilled alone, merged layer by layer (or, solo, the one
// row's plain caches); the last prompt tokens' argmax as the first decode input [B, 1].
std::pair<mlxcpp::LayerCaches, mx::array> prepare(const mlxcpp::Model& m, const Options& o, int B, bool solo) {
  std::vector<mlxcpp::LayerCaches> rows;
  std::vector<mx::array> next;
  for (int b = 0; b < B; ++b) {
    auto ids = prompt_ids(o.prompt, b, m.vocab_size());
    auto caches = m.make_cache();
    auto logits = m(mx::array(ids.data(), {1, o.prompt}, mx::int32), &caches);
    next.push_back(mx::argmax(mx::slice(logits, {0, o.prompt - 1, 0}, logits.shape()), -1));
    std::vector<mx::array> state{next.back()};
    for (auto& c : caches)
      for (auto& a : c->state_to_eval()) state.push_back(a);
    mx::eval(state);
    rows.push_back(std::move(caches));
  }
  auto y = mx::astype(mx::concatenate(next, 0), mx::int32);
  if (solo) return {std::move(rows[0]), y};
  mlxcpp::LayerCaches merged;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    std::vector<const mlxcpp::KVCacheBase*> layer;
    for (const auto& r : rows) layer.push_back(r[i].get());
    merged.push_back(mlxcpp::merge_layer_caches(layer));
  }
  std::vector<mx::array> state{y};
  for (auto& c : merged)
    for (auto& a : c->state_to_eval()) state.push_back(a);
  mx::eval(state);
  return {std::move(merged), y};
}

struct Timing {
  double step_ms, kernel_ms;
};

Timing time_steps(const mlxcpp::LoadedModel& loaded, const Options& o, int B, bool solo) {
  auto& m = *loaded.model;
  auto [caches, y] = prepare(m, o, B, solo);
  double total = 0;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup && loaded.kernels) loaded.kernels->reset_kernel_time();
    const auto t0 = clk::now();
    auto logits = m(y, &caches);
    // The greedy pick as the batch generator makes it (our argmax kernel on the fast path).
    auto pick = mlxcpp::kernels::argmax_last(logits, loaded.kernels);
    y = mx::astype(pick ? *pick : mx::argmax(logits, -1), mx::int32);  // [B, 1]
    mx::eval(y);
    if (s >= o.warmup) total += std::chrono::duration<double>(clk::now() - t0).count();
  }
  const double kernel = loaded.kernels ? loaded.kernels->kernel_seconds() : 0.0;
  return {total * 1e3 / o.steps, kernel * 1e3 / o.steps};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [--prompt N] [--steps N] [--threads N] [--batches 1,2,4] [--parity]\n",
                 argv[0]);
    return 2;
  }
  const Options o = parse(argc, argv);
  auto loaded = mlxcpp::load_model(o.dir, o.model);
  std::printf("mode: %s  threads: %d  prompt: %d tokens per row  steps: %d (after %d warm-up)\n",
              o.model.parity ? "parity" : "fast", loaded.kernels ? loaded.kernels->threads() : 0, o.prompt, o.steps,
              o.warmup);
  std::printf("%-10s %10s %12s %10s %14s %12s\n", "B", "ms/step", "kernel ms", "tok/s", "ms/row-token", "/ (B x solo)");
  const Timing solo = time_steps(loaded, o, 1, true);
  std::printf("%-10s %10.3f %12.3f %10.1f %14.3f %12s\n", "1 (solo)", solo.step_ms, solo.kernel_ms,
              1e3 / solo.step_ms, solo.step_ms, "1.00");
  for (int B : o.batches) {
    const Timing t = time_steps(loaded, o, B, false);
    std::printf("%-10d %10.3f %12.3f %10.1f %14.3f %12.2f\n", B, t.step_ms, t.kernel_ms, B * 1e3 / t.step_ms,
                t.step_ms / B, t.step_ms / (B * solo.step_ms));
  }
  return 0;
}
