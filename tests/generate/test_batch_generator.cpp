// BatchGenerator against mlx-lm's BatchGenerator (tools/oracle/batch_goldens.py): the same
// schedule of rows joining (also after the sliding-window rings wrapped), leaving and finishing
// gives the same tokens and bit-identical log-probabilities at every step, in parity mode.
// Also: a row's tokens equal its solo run (fast path), and extracted caches continue exactly.
#include <gtest/gtest.h>

#include <map>

#include <mlx/mlx.h>

#include "cache/quantized_rotating_kv_cache.h"
#include "generate/batch_generator.h"
#include "generate/generator.h"
#include "golden_model.h"
#include "models/model.h"
#include "slow_op.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

std::map<std::string, mx::array> batch_golden(const std::string& name) {
  auto path = golden_dir() / "batch" / (name + ".safetensors");
  if (!std::filesystem::exists(path)) throw std::runtime_error("missing golden " + path.string() + " (run make goldens)");
  auto loaded = mx::load_safetensors(path.string()).first;
  return {loaded.begin(), loaded.end()};
}

struct Scenario {
  std::string name, checkpoint;
};

class BatchParity : public ::testing::TestWithParam<Scenario> {};

TEST_P(BatchParity, EveryStepEqualsMlxLm) {
  auto g = batch_golden(GetParam().name);
  auto loaded = load_model(tiny_model_dir(GetParam().checkpoint), ModelOptions::parity_mode());
  auto opts = to_ints(g.at("options"));
  BatchOptions bo{.prefill_step_size = opts[0], .prefill_batch_size = opts[1], .completion_batch_size = opts[2]};
  BatchGenerator gen(*loaded.model, bo);
  auto rows = g.at("rows");
  const int R = rows.shape(0);
  auto spec = to_ints(mx::reshape(rows, {-1}));
  std::map<int, RowId> id_of;
  std::map<RowId, int> row_of;
  const int steps = to_ints(g.at("steps"))[0];
  int compared = 0;
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < R; ++r) {
      const int* f = &spec[r * 5];
      if (f[0] != s) continue;
      BatchRow row;
      row.prompt = to_ints(g.at("prompt." + std::to_string(r)));
      row.max_tokens = f[1];
      if (f[3] > 0) {
        LogitsProcessorParams lp;
        lp.repetition_penalty = f[3] / 100.0f;
        row.processors = make_logits_processors(lp);
      }
      const RowId id = gen.insert(std::move(row));
      id_of[r] = id;
      row_of[id] = r;
    }
    for (int r = 0; r < R; ++r) {
      if (spec[r * 5 + 2] == s && id_of.count(r)) gen.remove({id_of[r]});
    }
    auto out = gen.next();
    const std::string key = "step." + std::to_string(s);
    if (!g.count(key + ".rows")) {
      EXPECT_TRUE(out.empty()) << "step " << s << ": mlx-lm generated nothing";
      continue;
    }
    auto want_rows = to_ints(g.at(key + ".rows"));
    auto want_tokens = to_ints(g.at(key + ".tokens"));
    const auto& want_lp = g.at(key + ".logprobs");
    ASSERT_EQ(out.size(), want_rows.size()) << "step " << s;
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(row_of[out[i].row], want_rows[i]) << "step " << s << " entry " << i;
      EXPECT_EQ(out[i].token, want_tokens[i]) << "step " << s << " row " << want_rows[i];
      auto want = mx::slice(want_lp, {static_cast<int>(i), 0}, {static_cast<int>(i) + 1, want_lp.shape(1)});
      EXPECT_EQ(max_abs_diff(mx::reshape(out[i].logprobs, {1, -1}), want), 0.0f)
          << "step " << s << " row " << want_rows[i];
      ++compared;
    }
  }
  EXPECT_GT(compared, 10);
  EXPECT_TRUE(gen.idle());
}

INSTANTIATE_TEST_SUITE_P(Goldens, BatchParity,
                         ::testing::Values(Scenario{"llama_join_leave", "llama-q4g64"},
                                           Scenario{"llama_one_row", "llama-q4g64"},
                                           Scenario{"qwen2_wide", "qwen2-q4g64"},
                                           Scenario{"gemma3_rings", "gemma3-text-bf16"},
                                           Scenario{"llama_swa_rings", "llama-swa-bf16"},
                                           Scenario{"qwen3_join_leave", "qwen3-q4g64"},
                                           Scenario{"phi3_longrope_join_leave", "phi3-longrope-q4g64"},
                                           Scenario{"minicpm_join_leave", "minicpm-q4g64"},
                                           Scenario{"olmo2_join_leave", "olmo2-q4g64"},
                                           Scenario{"qwen3_5_join_leave", "qwen3_5-q4g64"},
                                           Scenario{"qwen3_next_join_leave", "qwen3-next-q4g64"},
                                           Scenario{"granite_join_leave", "granite-q4g64"},
                                           Scenario{"mistral3_join_leave", "mistral3-q4g64"},
                                           Scenario{"gemma4_shared_rings", "gemma4-text-bf16"},
                                           Scenario{"gemma4_moe_join_leave", "gemma4-moe-untied-q4g64"}),
                         [](const auto& info) { return info.param.name; });

// A greedy row of `prompt` with no cache.
BatchRow row_of(std::vector<int> prompt, int max_tokens = 256) {
  BatchRow r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

// Runs rows through a batch to the end; returns each row's tokens.
std::vector<std::vector<int>> run_batch(const Model& model, const std::vector<std::vector<int>>& prompts,
                                        int max_tokens, BatchOptions bo) {
  BatchGenerator gen(model, bo);
  std::map<RowId, size_t> idx;
  for (size_t i = 0; i < prompts.size(); ++i) idx[gen.insert(row_of(prompts[i], max_tokens))] = i;
  std::vector<std::vector<int>> out(prompts.size());
  for (int guard = 0; !gen.idle() && guard < 1000; ++guard) {
    for (const auto& t : gen.next()) out[idx[t.row]].push_back(t.token);
  }
  return out;
}

std::vector<int> run_solo(const Model& model, const std::vector<int>& prompt, int max_tokens) {
  GenerateOptions go;
  go.max_tokens = max_tokens;
  Generator gen(model, prompt, greedy_sampler, {}, go);
  std::vector<int> out;
  while (auto t = gen.next()) out.push_back(t->id);
  return out;
}

std::vector<std::vector<int>> prompts_of(std::initializer_list<int> lengths, int vocab) {
  std::vector<std::vector<int>> out;
  uint32_t seed = 3;
  for (int n : lengths) {
    std::vector<int> p;
    for (int i = 0; i < n; ++i) {
      seed = seed * 1103515245u + 12345u;  // an LCG: fixed prompts, no global state
      p.push_back(4 + static_cast<int>((seed & 0x7fffffffu) % static_cast<uint32_t>(vocab - 4)));
    }
    out.push_back(p);
  }
  return out;
}

TEST(BatchGenerator, GreedyRowsEqualSoloRunsInParity) {
  auto loaded = load_model(tiny_model_dir("gemma3-text-bf16"), ModelOptions::parity_mode());
  auto prompts = prompts_of({13, 4, 21, 9}, loaded.model->vocab_size());
  auto batched = run_batch(*loaded.model, prompts, 12, {.prefill_step_size = 6, .prefill_batch_size = 2});
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i], run_solo(*loaded.model, prompts[i], 12)) << "row " << i;
  }
}

TEST(BatchGenerator, RemovedRowCacheContinuesLikeTheRow) {
  auto loaded = load_model(tiny_model_dir("gemma3-text-bf16"), ModelOptions::parity_mode());
  auto prompts = prompts_of({11, 5}, loaded.model->vocab_size());
  BatchGenerator gen(*loaded.model, {});
  const RowId a = gen.insert(row_of(prompts[0], -1));
  gen.insert(row_of(prompts[1], -1));
  std::vector<int> seen;
  for (int i = 0; i < 20 && seen.size() < 10; ++i) {
    for (const auto& t : gen.next())
      if (t.row == a) seen.push_back(t.token);
  }
  ASSERT_EQ(seen.size(), 10u);
  auto caches = gen.remove({a}, /*extract=*/true);
  ASSERT_EQ(caches.size(), 1u);
  // The extracted cache holds the prompt and every token returned: fed one more token, it
  // goes on like a solo run over the whole text.
  std::vector<int> full = prompts[0];
  full.insert(full.end(), seen.begin(), seen.end());
  full.push_back(7);
  auto solo = run_solo(*loaded.model, full, 6);
  GenerateOptions go;
  go.max_tokens = 6;
  Generator cont(*loaded.model, {7}, greedy_sampler, {}, go, std::move(caches[0]));
  std::vector<int> got;
  while (auto t = cont.next()) got.push_back(t->id);
  EXPECT_EQ(got, solo);
}

// The fast path batches ragged caches by default: rows of very different lengths, one joining
// in 16-token chunks while the others decode, one leaving early; each row's greedy tokens equal
// its solo run's. The same with mlx-lm's left-padded caches on the fast path (ragged = 0).
// Llama, Qwen3 (q/k norms in the blocks), Phi-3 (partial longrope), MiniCPM (scaled residuals)
// Granite (attention_multiplier), OLMo 2 (no input norms, whole-width q/k norms, post-norms) and
// Mistral 3 (the llama-4 attention temperature at each row's positions).
TEST(BatchGenerator, FastPathRowsEqualSoloRuns) {
  for (const char* name : {"llama-q4g64", "qwen3-q4g64", "phi3-longrope-q4g64", "minicpm-q4g64", "granite-q4g64", "olmo2-q4g64",
                           "mistral3-q4g64"}) {
    SCOPED_TRACE(name);
    auto loaded = load_model(tiny_model_dir(name));
    ASSERT_TRUE(loaded.model->fast_path());
    auto prompts = prompts_of({13, 150, 40, 9}, loaded.model->vocab_size());
    const std::vector<int> max_tokens{20, 12, 3, 16};
    for (int ragged : {-1, 0}) {
      BatchGenerator gen(*loaded.model, {.prefill_step_size = 64, .decode_prefill_step = 16, .ragged = ragged,
                                         .prefill_batch_size = 1});
      EXPECT_EQ(gen.ragged(), ragged != 0);
      std::map<RowId, size_t> idx;
      std::vector<std::vector<int>> out(prompts.size());
      for (size_t i = 0; i < 2; ++i) idx[gen.insert(row_of(prompts[i], max_tokens[i]))] = i;
      for (int step = 0; !gen.idle() && step < 500; ++step) {
        if (step == 3 || step == 5) {  // join while the others decode
          const size_t i = step == 3 ? 2 : 3;
          idx[gen.insert(row_of(prompts[i], max_tokens[i]))] = i;
        }
        for (const auto& t : gen.next()) out[idx[t.row]].push_back(t.token);
      }
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(out[i], run_solo(*loaded.model, prompts[i], max_tokens[i]))
            << "ragged " << ragged << " row " << i;
      }
    }
  }
  // Parity mode has no fused blocks: left-padded caches (and a request for ragged ones fails).
  auto parity = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  EXPECT_FALSE(BatchGenerator(*parity.model, {}).ragged());
  EXPECT_THROW(BatchGenerator(*parity.model, {.ragged = 1}), Error);
}

// Recurrent (gated-DeltaNet) layers batch through mlx-lm's left-padded caches on the fast path too
// (no ragged caches for them): rows joining while others decode, right-padded prompt chunks with
// per-row lengths; each row's greedy tokens equal its solo run's.
TEST(BatchGenerator, RecurrentFastPathRowsEqualSoloRuns) {
  for (const char* name : {"qwen3_5-q4g64", "qwen3-next-q4g64"}) {
    SCOPED_TRACE(name);
    auto loaded = load_model(tiny_model_dir(name));
    ASSERT_TRUE(loaded.model->fast_path());
    auto prompts = prompts_of({13, 150, 40, 9}, loaded.model->vocab_size());
    const std::vector<int> max_tokens{20, 12, 3, 16};
    BatchGenerator gen(*loaded.model, {.prefill_step_size = 64, .decode_prefill_step = 16, .prefill_batch_size = 2});
    EXPECT_FALSE(gen.ragged());
    std::map<RowId, size_t> idx;
    std::vector<std::vector<int>> out(prompts.size());
    for (size_t i = 0; i < 2; ++i) idx[gen.insert(row_of(prompts[i], max_tokens[i]))] = i;
    for (int step = 0; !gen.idle() && step < 500; ++step) {
      if (step == 3 || step == 5) {
        const size_t i = step == 3 ? 2 : 3;
        idx[gen.insert(row_of(prompts[i], max_tokens[i]))] = i;
      }
      for (const auto& t : gen.next()) out[idx[t.row]].push_back(t.token);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out[i], run_solo(*loaded.model, prompts[i], max_tokens[i])) << "row " << i;
    }
  }
}

// Rows 0-2 from the start, row 3 joining at step 4 while they decode; each row's tokens.
std::vector<std::vector<int>> run_joining(const Model& model, const std::vector<std::vector<int>>& prompts,
                                          const std::vector<int>& max_tokens, const BatchOptions& bo) {
  BatchGenerator gen(model, bo);
  EXPECT_FALSE(gen.ragged());
  std::map<RowId, size_t> idx;
  std::vector<std::vector<int>> out(prompts.size());
  for (size_t i = 0; i < 3; ++i) idx[gen.insert(row_of(prompts[i], max_tokens[i]))] = i;
  for (int step = 0; !gen.idle() && step < 200; ++step) {
    if (step == 4) idx[gen.insert(row_of(prompts[3], max_tokens[3]))] = 3;
    for (const auto& t : gen.next()) out[idx[t.row]].push_back(t.token);
  }
  return out;
}

// Quantized KV caches batch (BatchQuantizedKVCache; mlx-lm cannot): rows of different lengths,
// prefilled two at a time with padding, one joining while the others decode; each row's greedy
// tokens equal its solo run with the same quantized cache from the first token; in parity mode
// and on the fast path, 8 and 4 bits. A row's extracted cache continues as the row.
TEST(BatchGenerator, QuantizedKvRowsEqualSoloRuns) {
  for (bool parity : {true, false}) {
    for (int bits : {8, 4}) {
      SCOPED_TRACE(std::string(parity ? "parity" : "fast") + " kv_bits " + std::to_string(bits));
      auto loaded = load_model(tiny_model_dir("llama-q4g64"), parity ? ModelOptions::parity_mode() : ModelOptions{});
      const KvQuantization q{bits, 32, 0};
      auto prompts = prompts_of({13, 40, 9, 22}, loaded.model->vocab_size());
      const std::vector<int> max_tokens{12, 8, 10, 6};
      auto out = run_joining(*loaded.model, prompts, max_tokens,
                             {.prefill_step_size = 16, .prefill_batch_size = 2, .kv_quantization = q});
      for (size_t i = 0; i < prompts.size(); ++i) {
        GenerateOptions go;
        go.max_tokens = max_tokens[i];
        go.kv_quantization = q;
        Generator solo(*loaded.model, prompts[i], greedy_sampler, {}, go);
        std::vector<int> want;
        while (auto t = solo.next()) want.push_back(t->id);
        EXPECT_EQ(out[i], want) << "row " << i;
      }
    }
  }
  EXPECT_THROW(BatchGenerator(*load_model(tiny_model_dir("llama-q4g64")).model,
                              {.kv_quantization = KvQuantization{8, 64, 100}}),
               RequestError);
}

// Gemma 4 with serve's --kv-bits: its plain caches batched quantized (the KV-shared layers attend
// over their donors' quantized rows; parity mode's sliding rings stay as they are); rows
// of different lengths prefilled two at a time, one joining while the others decode, each equal
// to the row run alone through the batch generator; in parity mode and on the fast path, 8 and
// 4 bits. (The single-sequence Generator quantizes the rings too, so it is not the reference.)
TEST(BatchGenerator, Gemma4QuantizedKvRowsEqualEachAlone) {
  for (bool parity : {true, false}) {
    auto loaded = load_model(tiny_model_dir("gemma4-text-q4g64"), parity ? ModelOptions::parity_mode() : ModelOptions{});
    for (int bits : {8, 4}) {
      SCOPED_TRACE(std::string(parity ? "parity" : "fast") + " kv_bits " + std::to_string(bits));
      const BatchOptions bo{.prefill_step_size = 16, .prefill_batch_size = 2, .kv_quantization = KvQuantization{bits, 32, 0}};
      auto prompts = prompts_of({13, 40, 9, 22}, loaded.model->vocab_size());
      const std::vector<int> max_tokens{12, 8, 10, 6};
      auto out = run_joining(*loaded.model, prompts, max_tokens, bo);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(out[i].size(), static_cast<size_t>(max_tokens[i])) << "row " << i;
        EXPECT_EQ(out[i], run_batch(*loaded.model, {prompts[i]}, max_tokens[i], bo)[0]) << "row " << i;
      }
      // Every layer's cache is held quantized in the batch, the sliding layers' rings too
      // (BatchQuantizedRotatingKVCache; on the fast path sliding layers keep plain caches, their
      // window applied by the attention kernel), and a row leaves with its quantized caches.
      BatchGenerator gen(*loaded.model, bo);
      const RowId id = gen.insert(row_of(prompts[1], 50));
      for (int s = 0; s < 6; ++s) gen.next();
      auto left = gen.remove({id}, true);
      ASSERT_EQ(left.size(), 1u);
      int rings = 0;
      for (const auto& c : left[0]) {
        EXPECT_TRUE(dynamic_cast<QuantizedCache*>(c.get())) << "a layer left unquantized";
        rings += dynamic_cast<QuantizedRotatingKVCache*>(c.get()) != nullptr;
      }
      if (parity) EXPECT_GT(rings, 0);
    }
  }
}

TEST(BatchGenerator, RejectsBadRows) {
  auto loaded = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  BatchGenerator gen(*loaded.model, {});
  EXPECT_THROW(gen.insert(row_of({})), RequestError);
  EXPECT_THROW(gen.insert(row_of({1, 100000})), RequestError);
  EXPECT_THROW(gen.insert(row_of({1}, 0)), RequestError);
  EXPECT_TRUE(gen.idle());
}

// Destroyed while a step it queued is still running, a BatchGenerator waits for it: MLX's stream
// thread would otherwise go on with work whose owner is gone, and at exit race MLX's and the
// program's static destructors (a heap corrupted at exit, seen in ~1 run in 200 of the grammar
// batch test).
TEST(BatchGenerator, DestructionWaitsForTheQueuedStep) {
  auto loaded = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  SlowOp slow;
  {
    BatchGenerator gen(*loaded.model, {});
    BatchRow row = row_of(prompts_of({9}, loaded.model->vocab_size())[0], -1);
    row.processors.push_back(slow.processor());
    gen.insert(std::move(row));
    int seen = 0;
    for (int guard = 0; seen == 0 && guard < 20; ++guard) seen += static_cast<int>(gen.next().size());
    ASSERT_EQ(seen, 1);
    slow.armed->store(true);
    ASSERT_EQ(gen.next().size(), 1u);  // queues the next step, the slow op in it
    ASSERT_FALSE(slow.done->load());
  }
  EXPECT_TRUE(slow.done->load());
}

}  // namespace
