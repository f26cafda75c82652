"""Records perplexity computed with mlx-lm's models the way llama-perplexity measures it.

Usage: python tools/oracle/perplexity_goldens.py OUTDIR   (after tiny_models.py OUTDIR)

The method (llama.cpp tools/perplexity, perplexity()): the tokens cut into non-overlapping
windows of CTX; each window's first token replaced by BOS where the tokenizer adds one; one forward
per window (no cache; parity mode: the model cast to float32); the logits of positions
[CTX/2, CTX-1) score the next tokens: nll = logsumexp(row) - row[target] (mlx-lm's cross entropy),
summed in double token by token; PPL = exp(mean), its error ppl * sqrt((E[nll^2] - E[nll]^2) /
(n - 1)). With a base model: KL(base || model) per token from both log-softmaxes and whether their
argmaxes agree.

Writes OUTDIR/perplexity/<case>.json: tokens, bos, ctx, chunks, ppl, ppl_error, nll, nll_error,
running_ppl, scored, and kl, kl_error, top1, top1_error where a base is given.
  tiny_<model>     random ids on a tiny checkpoint (CTX 32, BOS 1 or none)
  tiny_kl          llama-q4g64 against the base llama-bf16 (same vocabulary)
  smollm2          models/SmolLM2-135M-Instruct on tests/data/perplexity.txt (CTX 64, 2 windows)
"""
import json
import math
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.utils import load_model
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "tests" / "data" / "perplexity.txt"


class Acc:
    def __init__(self):
        self.sum, self.sum2, self.n = 0.0, 0.0, 0

    def add(self, values):
        for v in values:  # float32 -> double, in order, as the C++ side sums
            self.sum += v
            self.sum2 += v * v
            self.n += 1

    def result(self):
        mean = self.sum / self.n
        var = self.sum2 / self.n - mean * mean
        err = math.sqrt(var / (self.n - 1)) if var > 0 else 0.0
        return mean, err


def scored_rows(model, ids, first, n):
    logits = model(mx.array(ids, dtype=mx.int32)[None])
    return logits[0, first : first + n].astype(mx.float32)


def perplexity(model, tokens, bos, ctx, chunks=-1, base=None):
    first = ctx // 2
    n = ctx - first - 1
    fits = len(tokens) // ctx
    chunks = fits if chunks < 0 else min(chunks, fits)
    nll, kl, top1, running = Acc(), Acc(), Acc(), []
    for c in range(chunks):
        window = list(tokens[c * ctx : (c + 1) * ctx])
        if bos is not None:
            window[0] = bos
        rows = scored_rows(model, window, first, n)
        targets = mx.array(window[first + 1 :], dtype=mx.int32)
        token_nll = mx.logsumexp(rows, axis=-1) - mx.take_along_axis(rows, targets[:, None], axis=-1).squeeze(-1)
        nll.add(token_nll.tolist())
        if base is not None:
            brows = scored_rows(base, window, first, n)
            lb = brows - mx.logsumexp(brows, axis=-1, keepdims=True)
            lm = rows - mx.logsumexp(rows, axis=-1, keepdims=True)
            kl.add(mx.sum(mx.exp(lb) * (lb - lm), axis=-1).tolist())
            top1.add(mx.equal(mx.argmax(brows, axis=-1), mx.argmax(rows, axis=-1)).astype(mx.float32).tolist())
        running.append(math.exp(nll.sum / nll.n))
    mean, err = nll.result()
    ppl = math.exp(mean)
    out = {"tokens": [int(t) for t in tokens], "bos": bos, "ctx": ctx, "chunks": chunks, "ppl": ppl,
           "ppl_error": ppl * err, "nll": mean, "nll_error": err, "running_ppl": running, "scored": nll.n}
    if base is not None:
        out["kl"], out["kl_error"] = kl.result()
        out["top1"], out["top1_error"] = top1.result()
    return out


def parity_model(path):
    model, config = load_model(Path(path))
    model.set_dtype(mx.float32)
    return model, config


def vocab_of(config):
    return config["vocab_size"] if "vocab_size" in config else config["text_config"]["vocab_size"]


def main(out):
    out = Path(out)
    (out / "perplexity").mkdir(parents=True, exist_ok=True)
    tiny = out / "models"
    rng = np.random.default_rng(11)

    def write(name, record):
        (out / "perplexity" / f"{name}.json").write_text(json.dumps(record))

    # Random ids on tiny checkpoints: a dense, a Gemma and an MoE family; with and without BOS.
    for name, bos in (("llama-q4g64", 1), ("gemma3-text-q4g64", 2), ("qwen3-moe-q4g64", None)):
        model, config = parity_model(tiny / name)
        tokens = rng.integers(4, vocab_of(config), 3 * 32 + 7).tolist()
        write(f"tiny_{name}", perplexity(model, tokens, bos, 32))
    model, config = parity_model(tiny / "llama-q4g64")
    base, _ = parity_model(tiny / "llama-bf16")
    tokens = rng.integers(4, vocab_of(config), 2 * 32 + 3).tolist()
    write("tiny_kl", perplexity(model, tokens, 1, 32, base=base))

    # The real model on a real text, tokenized as transformers does with special tokens.
    snap = ROOT / "models" / "SmolLM2-135M-Instruct"
    tok = AutoTokenizer.from_pretrained(str(snap))
    tokens = tok(TEXT.read_text(encoding="utf-8"), add_special_tokens=True).input_ids
    first = tok("a", add_special_tokens=True).input_ids
    bos = tok.bos_token_id if tok.bos_token_id is not None and first and first[0] == tok.bos_token_id else None
    model, _ = parity_model(snap)
    write("smollm2", perplexity(model, tokens, bos, 64, chunks=2))


if __name__ == "__main__":
    main(sys.argv[1])
