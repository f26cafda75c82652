"""Goldens for src/generate/batch_generator: drive mlx-lm's own BatchGenerator on the tiny
checkpoints (parity mode: model cast to float32) with a fixed schedule of rows joining, leaving
and finishing, and record every generated token with its log-probabilities.

Usage: .venv/bin/python tools/oracle/batch_goldens.py OUTDIR   (after tiny_models.py OUTDIR)
Writes OUTDIR/batch/<scenario>.safetensors with
  options            [3] int32: prefill_step_size, prefill_batch_size, completion_batch_size
  rows               [R, 5] int32: insert_step, max_tokens, remove_step (-1: never),
                     repetition_penalty x 100 (0: none), prompt length
  prompt.<r>         [len] int32
  step.<s>.rows      [k] int32: the rows (insert order) that generated a token at next() call s
  step.<s>.tokens    [k] int32
  step.<s>.logprobs  [k, V] float32
  steps              [1] int32: next() calls made
At call s, the rows inserted at step s are inserted first, then the rows removed at step s are
removed, then next() runs. tests/generate/test_batch_generator.cpp replays the schedule.
"""
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import BatchGenerator
from mlx_lm.sample_utils import make_logits_processors
from mlx_lm.utils import load_model

# name, checkpoint, (prefill_step_size, prefill_batch_size, completion_batch_size),
# rows: (prompt length, insert step, max_tokens, remove step or -1, repetition penalty or 0)
SCENARIOS = [
    ("llama_join_leave", "llama-q4g64", (4, 2, 3), [
        (7, 0, 10, -1, 0), (3, 0, 6, 5, 0), (12, 0, 8, -1, 0),
        (5, 4, 6, -1, 1.3), (1, 6, 4, -1, 0), (9, 9, 7, -1, 0)]),
    ("llama_one_row", "llama-q4g64", (8, 8, 32), [(20, 0, 12, -1, 0)]),
    ("qwen2_wide", "qwen2-q4g64", (16, 8, 8), [
        (3, 0, 9, -1, 0), (17, 0, 5, -1, 0), (9, 0, 12, -1, 1.2), (30, 0, 6, -1, 0),
        (2, 2, 8, -1, 0), (14, 3, 10, 8, 0)]),
    # Gemma 3: window 8, so the sliding layers' rings wrap; a row joins after they wrapped.
    ("gemma3_rings", "gemma3-text-bf16", (5, 3, 4), [
        (13, 0, 14, -1, 0), (20, 0, 12, -1, 0), (9, 0, 16, -1, 0),
        (11, 12, 10, -1, 0), (4, 14, 6, -1, 1.3)]),
    ("llama_swa_rings", "llama-swa-bf16", (6, 2, 4), [
        (10, 0, 14, -1, 0), (15, 0, 10, 7, 0), (4, 3, 12, -1, 0), (12, 11, 8, -1, 0)]),
    # Qwen3: per-head q/k norms under per-row RoPE offsets; rows join and leave.
    ("qwen3_join_leave", "qwen3-q4g64", (6, 3, 4), [
        (8, 0, 10, -1, 0), (21, 0, 7, 6, 0), (3, 0, 12, -1, 1.2), (13, 5, 9, -1, 0), (6, 8, 6, -1, 0)]),
    # Phi-3 longrope: split qkv/gate_up, partial rotary with long factors at per-row offsets.
    ("phi3_longrope_join_leave", "phi3-longrope-q4g64", (5, 2, 3), [
        (9, 0, 11, -1, 0), (17, 0, 6, 5, 0), (4, 2, 9, -1, 1.3), (12, 6, 7, -1, 0)]),
    # MiniCPM: scaled embeddings, residuals and logits; rows join and leave.
    ("minicpm_join_leave", "minicpm-q4g64", (6, 2, 4), [
        (11, 0, 9, -1, 0), (5, 0, 8, 4, 0), (15, 3, 7, -1, 1.2), (7, 5, 10, -1, 0)]),
    # OLMo 2: whole-projection q/k norms, post-branch norms; rows join and leave.
    ("olmo2_join_leave", "olmo2-q4g64", (7, 2, 5), [
        (10, 0, 9, -1, 0), (6, 0, 7, 3, 0), (14, 2, 8, -1, 1.1), (8, 4, 9, -1, 0)]),
    # Granite: multiplied embeddings/residuals, attention_multiplier, logits / logits_scaling.
    ("granite_join_leave", "granite-q4g64", (8, 2, 3), [
        (9, 0, 10, -1, 0), (13, 0, 6, 4, 0), (5, 3, 9, -1, 1.3), (11, 5, 8, -1, 0)]),
    # Mistral 3 (ministral3 text): the llama-4 attention temperature at per-row offsets.
    ("mistral3_join_leave", "mistral3-q4g64", (5, 2, 3), [
        (12, 0, 10, -1, 0), (4, 0, 7, 5, 0), (9, 3, 9, -1, 1.2), (15, 4, 8, -1, 0)]),
    # Qwen3.5: recurrent (ArraysCache) layers batched with KV layers: right-padded prompts prefilled
    # with per-row lengths, rows joining a running batch and leaving it.
    ("qwen3_5_join_leave", "qwen3_5-q4g64", (6, 3, 4), [
        (9, 0, 10, -1, 0), (17, 0, 7, 6, 0), (3, 0, 12, -1, 1.2), (13, 5, 9, -1, 0), (6, 8, 6, -1, 0)]),
    ("qwen3_next_join_leave", "qwen3-next-q4g64", (5, 2, 3), [
        (11, 0, 9, -1, 0), (4, 0, 8, 4, 0), (15, 3, 7, -1, 0), (7, 5, 10, -1, 0)]),
    # Gemma 4: KV-shared layers reading their donors' batch caches (window 8: the sliding rings
    # wrap), per-layer inputs; a row joins after they wrapped.
    ("gemma4_shared_rings", "gemma4-text-bf16", (5, 3, 4), [
        (13, 0, 14, -1, 0), (20, 0, 12, -1, 0), (9, 0, 16, 6, 0), (11, 10, 10, -1, 1.3), (4, 12, 6, -1, 0)]),
    # Gemma 4's MoE layout: k_eq_v full layers, dense MLP + 8 experts (top 4) per layer.
    ("gemma4_moe_join_leave", "gemma4-moe-untied-q4g64", (6, 2, 3), [
        (10, 0, 9, -1, 0), (5, 0, 8, 4, 0), (14, 3, 7, -1, 1.2), (7, 5, 10, -1, 0)]),
]
MAX_STEPS = 80


def run(name, ckpt, opts, rows, out):
    model, config = load_model(out / "models" / ckpt)
    model.set_dtype(mx.float32)
    vocab = config.get("vocab_size") or config["text_config"]["vocab_size"]
    rng = np.random.default_rng(11)
    prompts = [rng.integers(4, vocab, n).tolist() for n, *_ in rows]
    step_size, prefill_batch, completion_batch = opts
    gen = BatchGenerator(model, prefill_step_size=step_size, prefill_batch_size=prefill_batch,
                         completion_batch_size=completion_batch)
    g = {
        "options": mx.array(list(opts), dtype=mx.int32),
        "rows": mx.array([[ins, mt, rem, int(round(rp * 100)), n] for n, ins, mt, rem, rp in rows], dtype=mx.int32),
    }
    for r, p in enumerate(prompts):
        g[f"prompt.{r}"] = mx.array(p, dtype=mx.int32)
    uid_of, row_of = {}, {}
    pending = len(rows)
    steps = 0
    for s in range(MAX_STEPS):
        for r, (n, ins, mt, rem, rp) in enumerate(rows):
            if ins == s:
                lp = [make_logits_processors(repetition_penalty=rp, repetition_context_size=20)] if rp else [[]]
                (uid,) = gen.insert([prompts[r]], max_tokens=[mt], logits_processors=lp)
                uid_of[r], row_of[uid] = uid, r
        for r, (n, ins, mt, rem, rp) in enumerate(rows):
            if rem == s and r in uid_of:
                gen.remove([uid_of[r]])
        _, responses = gen.next()
        steps = s + 1
        if responses:
            g[f"step.{s}.rows"] = mx.array([row_of[x.uid] for x in responses], dtype=mx.int32)
            g[f"step.{s}.tokens"] = mx.array([x.token for x in responses], dtype=mx.int32)
            g[f"step.{s}.logprobs"] = mx.stack([x.logprobs for x in responses])
        done_inserting = all(ins < steps for _, ins, *_ in rows)
        if done_inserting and not gen._unprocessed_sequences and not len(gen._prompt_batch) and not len(gen._generation_batch):
            break
    g["steps"] = mx.array([steps], dtype=mx.int32)
    gen.close()
    mx.save_safetensors(str(out / "batch" / f"{name}.safetensors"), g)


def main(out):
    out = Path(out)
    (out / "batch").mkdir(parents=True, exist_ok=True)
    for name, ckpt, opts, rows in SCENARIOS:
        run(name, ckpt, opts, rows, out)


if __name__ == "__main__":
    main(sys.argv[1])
