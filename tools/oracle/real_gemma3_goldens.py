"""mlx-lm's logits on the real gemma-3-270m-it snapshot (converted from the GGUF Q4_K_M by
`mlxcpp convert`, see tools/fetch_models.sh), in parity mode (float32):

  text_prompt    [16]       BOS + the first 15 tokens of a sentence
  text_logits    [16, V]    prefill logits at every position
  france_prompt  [L]        BOS + "The capital of France is"
  greedy_tokens  [16]       generate_step's greedy tokens after that prompt
  greedy_logits  [16, V]    the logits of 16 greedy single-token steps after a one-shot prefill
  text_ids       [552]      BOS + the SmolLM2 goldens' natural text, for the fast-vs-parity
                           comparison (teacher forcing past the 512-token sliding window)

Usage: real_gemma3_goldens.py GOLDEN_DIR [MODELS_DIR]  (writes GOLDEN_DIR/real/gemma3.safetensors)
"""
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model
from transformers import AutoTokenizer

from real_model_goldens import TEXT as LONG_TEXT

TEXT = "The river had been rising for three days before anyone in the village thought to move the grain."


def main(out, models="models"):
    path = Path(models) / "gemma-3-270m-it"
    if not (path / "config.json").exists():
        sys.exit(f"real_gemma3_goldens: {path} is missing (run `make models`)")
    model, _ = load_model(path)
    model.set_dtype(mx.float32)
    tok = AutoTokenizer.from_pretrained(str(path))
    g = {}
    text = tok(TEXT)["input_ids"][:16]
    assert len(text) == 16 and text[0] == tok.bos_token_id, text
    g["text_prompt"] = mx.array(text, dtype=mx.int32)
    g["text_logits"] = model(g["text_prompt"][None], cache=make_prompt_cache(model))[0]

    prompt = mx.array(tok("The capital of France is")["input_ids"], dtype=mx.int32)
    g["france_prompt"] = prompt
    toks = [int(t) for t, _ in generate_step(prompt, model, max_tokens=16)]
    g["greedy_tokens"] = mx.array(toks, dtype=mx.int32)
    cache = make_prompt_cache(model)
    y = int(mx.argmax(model(prompt[None], cache=cache)[0, -1]).item())
    steps = []
    for _ in range(16):
        step = model(mx.array([[y]], dtype=mx.int32), cache=cache)[0, -1]
        steps.append(step)
        y = int(mx.argmax(step).item())
    g["greedy_logits"] = mx.stack(steps)
    ids = tok(LONG_TEXT)["input_ids"]
    assert len(ids) >= 552 and ids[0] == tok.bos_token_id, len(ids)
    g["text_ids"] = mx.array(ids[:552], dtype=mx.int32)
    (Path(out) / "real").mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(Path(out) / "real" / "gemma3.safetensors"), g)
    print(f"real gemma3: france {prompt.tolist()} -> {toks}")
    print(repr(tok.decode(toks)))


if __name__ == "__main__":
    main(*sys.argv[1:])
