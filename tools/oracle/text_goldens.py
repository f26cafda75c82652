"""Goldens for the text commands (mlxcpp generate --prompt / chat): mlx-lm's own output text.

Usage: .venv/bin/python tools/oracle/text_goldens.py OUTDIR
Writes OUTDIR/text/:
  models/<name>/   a tiny random llama (4-bit, hidden 64) whose vocab_size equals a fixture
                   tokenizer's length, with that tokenizer's files: a snapshot mlx_lm.load opens
  cases.json       {"cases": [...]}, each: name, model (folder relative to OUTDIR), command ("generate" | "chat" |
                   "repl"), the CLI inputs (prompt, system, raw, kwargs, stops, max_tokens, turns)
                   and mlx-lm's result: text (per turn for "repl"), tokens, prompt_ids
Text is what mlx_lm.generate prints (its main(): chat template applied to [system?, user] with
add_generation_prompt, else the raw prompt with special tokens; greedy; the model cast to
float32 as in parity mode), streamed through mlx-lm's detokenizer. Stop cases apply vLLM's
rule to that text: the output ends right before the first occurrence of any stop string.
"repl" turns keep the whole conversation and reuse the KV cache when the new rendered prompt
extends the tokens already in it (prompt + generated, an eos included), else re-prefill.
"""

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
import fixtures  # noqa: E402

MAX_TOKENS = 24
SAMPLING = {"temp": 1.0, "seed": 7}

# name -> (fixture tokenizer, seed, eos from generation_config.json)
MODELS = {"qwen3tok-llama-q4": ("qwen3", 4242, False), "llama2tok-llama-q4": ("llama2", 4343, True)}
EOS_PROMPT = "Write a haiku about the sea."


def build_model(out_dir, fixture, seed):
    import mlx.core as mx
    import transformers
    from mlx_lm.models import llama
    from mlx_lm.utils import quantize_model, save_config, save_model
    from transformers.utils import logging

    logging.set_verbosity_error()
    src = fixtures.fixture_dir(fixture)
    vocab = len(transformers.AutoTokenizer.from_pretrained(src))
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    }
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    model, config = quantize_model(model, config, 64, 4)
    save_model(out_dir, model)
    save_config(config, config_path=out_dir / "config.json")
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), out_dir / f)


def prompt_ids(tokenizer, messages, raw_prompt, kwargs):
    """mlx_lm.generate main(): the chat template unless raw (or none), else special tokens."""
    if raw_prompt is None and tokenizer.has_chat_template:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
        return tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.encode(raw_prompt, add_special_tokens=True)


def generate(model, tokenizer, ids, cache=None, sampler=None):
    """stream_generate as mlx_lm.generate runs it. Each response carries one token; the last one is
    the token that ended it (an eos included), so `tokens` is what the cache now holds after ids."""
    from mlx_lm.generate import stream_generate

    text, tokens, finish = "", [], None
    for r in stream_generate(model, tokenizer, ids, max_tokens=MAX_TOKENS, prompt_cache=cache,
                               sampler=sampler):
        text += r.text
        tokens.append(r.token)
        finish = r.finish_reason
    return text, tokens, finish


def rel(path):
    """Model folders are named relative to OUTDIR (the tests' golden dir)."""
    return str(Path(path).relative_to(Path(path).parents[2]))


def cut_at_stops(text, stops):
    hits = [text.find(s) for s in stops if s and s in text]
    return text[: min(hits)] if hits else text


def messages_of(system, prompt):
    return ([{"role": "system", "content": system}] if system is not None else []) + [{"role": "user", "content": prompt}]


def make_sampler(sampling):
    """The CLI seeds right before the first step (--seed), then samples with --temp."""
    import mlx.core as mx
    from mlx_lm.sample_utils import make_sampler as mk

    if not sampling:
        return None
    mx.random.seed(sampling["seed"])
    return mk(temp=sampling["temp"])


def one_shot(model, tok, name, path, command, prompt, system=None, raw=False, kwargs=None, sampling=None):
    kwargs = kwargs or {}
    ids = prompt_ids(tok, messages_of(system, prompt), prompt if raw or not tok.has_chat_template else None, kwargs)
    text, tokens, finish = generate(model, tok, ids, sampler=make_sampler(sampling))
    return {"name": name, "model": rel(path), "command": command, "prompt": prompt, "system": system, "raw": raw,
            "kwargs": kwargs, "sampling": sampling, "max_tokens": MAX_TOKENS, "prompt_ids": ids, "text": text,
            "tokens": tokens, "finish": finish}


def stop_cases(base):
    """Stops chosen from the text itself: one spanning two characters' boundary mid-text, several
    at once, and one that never occurs."""
    text = base["text"]
    cases = []
    if len(text) >= 8:
        mid = len(text) // 2
        for stops in ([text[mid - 1: mid + 2]], [text[mid + 2: mid + 4], text[mid - 3: mid - 1]], ["@@never@@"]):
            cases.append({**base, "name": base["name"] + f"-stop{len(cases)}", "stops": stops,
                          "text": cut_at_stops(text, stops)})
    return cases


def repl(model, tok, name, path, turns, sampling):
    from mlx_lm.models.cache import make_prompt_cache

    sampler = make_sampler(sampling)  # seeded once, before the first turn
    messages, cache, cached, texts, reused, fed = [], None, [], [], [], []
    for user in turns:
        messages.append({"role": "user", "content": user})
        ids = tok.encode(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                         add_special_tokens=False)
        extends = cache is not None and len(ids) > len(cached) and ids[: len(cached)] == cached
        if not extends:
            cache = make_prompt_cache(model)
        feed = ids[len(cached):] if extends else ids
        text, tokens, _ = generate(model, tok, feed, cache, sampler)
        cached = ids + tokens
        messages.append({"role": "assistant", "content": text})
        texts.append(text)
        reused.append(extends)
        fed.append(len(feed))
    return {"name": name, "model": rel(path), "command": "repl", "turns": turns, "max_tokens": MAX_TOKENS,
            "sampling": sampling,
            "texts": texts, "cache_reused": reused, "prompt_tokens": fed}


def main(out):
    import mlx.core as mx
    from mlx_lm import load

    root = Path(out) / "text"
    cases = []
    for name, (fixture, seed, eos_probe) in MODELS.items():
        path = root / "models" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        build_model(path, fixture, seed)
        model, tok = load(str(path))
        model.set_dtype(mx.float32)
        if eos_probe:
            # generation_config.json's eos joins the tokenizer's: make the first token that differs
            # from the greedy answer's first one an eos id, so that answer ("-generate") ends early.
            tokens = one_shot(model, tok, "", path, "generate", EOS_PROMPT)["tokens"]
            eos = next(t for t in tokens if t != tokens[0])
            with open(path / "generation_config.json", "w") as f:
                json.dump({"eos_token_id": [tok.eos_token_id, eos]}, f)
            model, tok = load(str(path))
            model.set_dtype(mx.float32)
        cases.append(one_shot(model, tok, f"{name}-generate", path, "generate", EOS_PROMPT))
        sampled = one_shot(model, tok, f"{name}-sampled", path, "generate", "Write a haiku about the sea.",
                           sampling=SAMPLING)
        cases += [sampled] + stop_cases(sampled)
        cases.append(one_shot(model, tok, f"{name}-raw", path, "generate", "The capital of France is", raw=True))
        if tok.has_chat_template:
            cases.append(one_shot(model, tok, f"{name}-system", path, "generate", "What is 2+2?",
                                  system="You are a terse assistant."))
            cases.append(one_shot(model, tok, f"{name}-chat", path, "chat", "Tell me a joke.",
                                  system="You are a helpful assistant.", sampling=SAMPLING))
            cases.append(one_shot(model, tok, f"{name}-chat-kwargs", path, "chat", "Tell me a joke.",
                                  kwargs={"enable_thinking": False}))
            cases.append(repl(model, tok, f"{name}-repl", path, ["Hello!", "And what about tomorrow?"], SAMPLING))
    with open(root / "cases.json", "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False, indent=1)
    for c in cases:
        print(f"text goldens: {c['name']}: {json.dumps(c.get('text', c.get('texts')), ensure_ascii=False)[:100]}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
