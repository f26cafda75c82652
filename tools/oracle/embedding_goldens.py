"""Goldens for embeddings (last-token pooling + L2 normalization, as Qwen3-Embedding is used).

Usage: .venv/bin/python tools/oracle/embedding_goldens.py OUTDIR   (after tiny_models.py OUTDIR)
mlx-lm has no embedding API, so this composes one from its parts, on the model cast to float32
(parity mode, as model_goldens.py): h = model.model(ids) (the final normed hidden states, the
head's input), the last token's row, then l2_normalize below. `dimensions` (Matryoshka) keeps
the first D values of that row and normalizes those. Writes OUTDIR/embedding/:
  <name>.safetensors   for the tiny qwen3-bf16 and qwen3-q4g64 checkpoints, per prompt i:
                       ids_i [L], hidden_i [H] (the raw last row), emb_i [H], dim_i [D] (D =
                       metadata "dimensions"), chunked_i [H] (the prompt through a fresh cache in
                       chunks of metadata "chunk" tokens, normalized); batch_ids [2, L] and
                       batch_emb [2, H]: two prompts of one length in one forward.
  models/qwen3emb-q4/  a tiny random qwen3 (4-bit) with the real Qwen3 tokenizer (fixture) whose
                       tokenizer.json carries Qwen3-Embedding's post-processor (it appends
                       <|endoftext|>), max_position_embeddings 128
  text.json            {"model", "context_length", "dimensions", "cases": [{text, ids, embedding,
                       embedding_dim}]}: ids as transformers' AutoTokenizer encodes the text (what a
                       user of the HF model gets: the eos appended), embeddings of those ids.
"""
import json
import os
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model

sys.path.insert(0, os.path.dirname(__file__))
import fixtures  # noqa: E402
from tiny_models import QWEN3  # noqa: E402

TINY = ["qwen3-bf16", "qwen3-q4g64"]
LENGTHS = [1, 5, 12, 20]
DIMENSIONS = 32
CHUNK = 8
# Qwen3-Embedding's tokenizer.json post-processor (its tokenizer_config.json keeps eos <|im_end|>).
EMBEDDING_POST_PROCESSOR = {
    "type": "Sequence",
    "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
            "pair": [
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}},
            ],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}},
        },
    ],
}
TEXTS = [
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:What is the capital of China?",
    "The capital of China is Beijing.",
    "Hello",
    "重力是一种使两个物体相互吸引的力。",
]


def l2_normalize(x):
    """x / max(||x||, 1e-12) over the last axis (torch's F.normalize, which sentence-transformers uses)."""
    norm = mx.sqrt(mx.sum(x * x, axis=-1, keepdims=True))
    return x / mx.maximum(norm, 1e-12)


def last_hidden(model, ids):
    """ids [B, L] -> [B, H]: the final normed hidden state of each row's last token."""
    return model.model(ids)[:, -1, :]


def chunked_last_hidden(model, ids, chunk):
    cache = make_prompt_cache(model)
    h = None
    for a in range(0, ids.shape[1], chunk):
        h = model.model(ids[:, a : a + chunk], cache=cache)
    return h[:, -1, :]


def tiny_goldens(path):
    model, config = load_model(path)
    model.set_dtype(mx.float32)
    rng = np.random.default_rng(11)
    g = {}
    for i, n in enumerate(LENGTHS):
        ids = mx.array(rng.integers(4, config["vocab_size"], n), dtype=mx.int32)
        hidden = last_hidden(model, ids[None])
        g[f"ids_{i}"] = ids
        g[f"hidden_{i}"] = hidden[0]
        g[f"emb_{i}"] = l2_normalize(hidden)[0]
        g[f"dim_{i}"] = l2_normalize(hidden[:, :DIMENSIONS])[0]
        g[f"chunked_{i}"] = l2_normalize(chunked_last_hidden(model, ids[None], CHUNK))[0]
    batch = mx.array(rng.integers(4, config["vocab_size"], (2, 12)), dtype=mx.int32)
    g["batch_ids"] = batch
    g["batch_emb"] = l2_normalize(last_hidden(model, batch))
    mx.eval(g)
    return g


def build_text_model(out_dir, tokenizer_dir, vocab):
    from mlx_lm.models import qwen3
    from mlx_lm.utils import quantize_model, save_config, save_model

    config = {**QWEN3, "hidden_size": 64, "head_dim": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
              "intermediate_size": 128, "vocab_size": vocab, "max_position_embeddings": 128}
    mx.random.seed(5151)
    model = qwen3.Model(qwen3.ModelArgs.from_dict(config))
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    model, config = quantize_model(model, config, 64, 4)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_model(out_dir, model)
    save_config(config, config_path=out_dir / "config.json")
    for f in os.listdir(tokenizer_dir):
        shutil.copy(os.path.join(tokenizer_dir, f), out_dir / f)
    tj = json.loads((out_dir / "tokenizer.json").read_text())
    tj["post_processor"] = EMBEDDING_POST_PROCESSOR
    (out_dir / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))


def text_goldens(out):
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    src = fixtures.fixture_dir("qwen3")
    model_dir = out / "models" / "qwen3emb-q4"
    build_text_model(model_dir, src, len(transformers.AutoTokenizer.from_pretrained(src)))
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model, config = load_model(model_dir)
    model.set_dtype(mx.float32)
    cases = []
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        assert ids[-1] == 151643, f"the post-processor did not append <|endoftext|>: {ids}"
        hidden = last_hidden(model, mx.array([ids], dtype=mx.int32))
        cases.append({"text": text, "ids": ids, "embedding": l2_normalize(hidden)[0].tolist(),
                      "embedding_dim": l2_normalize(hidden[:, :DIMENSIONS])[0].tolist()})
    doc = {"model": str(model_dir.relative_to(out.parent)), "context_length": config["max_position_embeddings"],
           "dimensions": DIMENSIONS, "cases": cases}
    (out / "text.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1))


def main(outdir):
    root = Path(outdir)
    out = root / "embedding"
    out.mkdir(parents=True, exist_ok=True)
    meta = {"dimensions": str(DIMENSIONS), "chunk": str(CHUNK), "count": str(len(LENGTHS))}
    for name in TINY:
        mx.save_safetensors(str(out / f"{name}.safetensors"), tiny_goldens(root / "models" / name), metadata=meta)
    text_goldens(out)


if __name__ == "__main__":
    main(sys.argv[1])
