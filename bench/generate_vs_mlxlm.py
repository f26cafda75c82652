"""mlxcpp generate vs mlx-lm generate_step on the same MLX snapshot, in the same run.

Usage: .venv/bin/python bench/generate_vs_mlxlm.py [--model DIR | --shape smollm2-135m]
         [--prompt 64] [--tokens 128] [--runs 5]
Default model: the tiny llama-q4g64 oracle checkpoint (build/golden/models). With
--shape smollm2-135m a random checkpoint with SmolLM2-135M's shapes (4-bit g64) is built once
under build/bench/. Both engines get the same prompt ids and generate greedily with eos ignored;
timings are taken where mlx-lm's stream_generate takes them (prompt: start to first token;
generation: tokens after that over time since the first). Prints medians and ratios.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "oracle"))

SMOLLM2_135M = {
    "model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "intermediate_size": 1536,
    "num_attention_heads": 9, "num_key_value_heads": 3, "rms_norm_eps": 1e-5, "vocab_size": 49152,
    "max_position_embeddings": 8192, "rope_theta": 100000.0, "tie_word_embeddings": True,
}


def ensure_shape_model(name):
    from mlx_lm.utils import save_config, save_model
    from tiny_models import build
    path = ROOT / "build" / "bench" / name
    if not (path / "config.json").exists():
        model, cfg = build(name, SMOLLM2_135M, (4, 64), seed=0)
        save_model(path, model)
        save_config(cfg, config_path=path / "config.json")
    return path


def mlxlm_run(path, prompt, tokens, float32):
    from mlx_lm.generate import generate_step
    from mlx_lm.utils import load_model
    model, _ = load_model(path)
    if float32:
        model.set_dtype(mx.float32)
    tic = time.perf_counter()
    n = 0
    for n, _ in enumerate(generate_step(mx.array(prompt), model, max_tokens=tokens)):
        if n == 0:
            prompt_tps = len(prompt) / (time.perf_counter() - tic)
            tic = time.perf_counter()
    return prompt_tps, (n + 1) / (time.perf_counter() - tic)


def mlxcpp_run(path, prompt, tokens, parity):
    out = subprocess.run(
        [str(ROOT / "build" / "mlxcpp"), "generate", "--model", str(path), "--prompt-ids",
         ",".join(map(str, prompt)), "--max-tokens", str(tokens), "--ignore-eos"] + (["--parity"] if parity else []),
        capture_output=True, text=True, check=True)
    m = re.search(r"prompt: \d+ tokens, ([\d.]+) tokens-per-sec \| generation: \d+ tokens, ([\d.]+)", out.stderr)
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--shape", choices=["smollm2-135m"])
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    if a.shape:
        path = ensure_shape_model(a.shape)
    else:
        path = Path(a.model) if a.model else ROOT / "build" / "golden" / "models" / "llama-q4g64"
    vocab = json.loads((path / "config.json").read_text())["vocab_size"]
    prompt = np.random.default_rng(0).integers(4, vocab, a.prompt).tolist()
    results = {}
    for name, fn in [
        ("mlxcpp (fast, default)", lambda: mlxcpp_run(path, prompt, a.tokens, False)),
        ("mlxcpp (parity, f32)", lambda: mlxcpp_run(path, prompt, a.tokens, True)),
        ("mlx-lm (f32, as parity)", lambda: mlxlm_run(path, prompt, a.tokens, True)),
        ("mlx-lm (default dtype)", lambda: mlxlm_run(path, prompt, a.tokens, False)),
    ]:
        runs = [fn() for _ in range(a.runs)]
        results[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    print(f"model: {path}  prompt {a.prompt} tokens, generate {a.tokens}, median of {a.runs}")
    for name, (p, g) in results.items():
        print(f"  {name:26s} prompt {p:9.1f} tok/s   generation {g:8.1f} tok/s")
    for ours_name in ["mlxcpp (fast, default)", "mlxcpp (parity, f32)"]:
        ours = results[ours_name]
        for peer in ["mlx-lm (f32, as parity)", "mlx-lm (default dtype)"]:
            p, g = results[peer]
            print(f"  ratio {ours_name} / {peer}: prompt {ours[0] / p:.2f}x  generation {ours[1] / g:.2f}x")


if __name__ == "__main__":
    main()
