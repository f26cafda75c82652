"""Goldens for src/tokenizer: transformers' AutoTokenizer (HF tokenizers underneath) on a corpus.

Usage: .venv/bin/python tools/oracle/tokenizer_goldens.py OUTDIR
Writes OUTDIR/tokenizer/:
  corpus.json      the strings (deterministic: fixed pools + seeded random mixes), versions
  <name>.json      per fixture tokenizer: its directory, transformers' class and special tokens,
                   the backend pipeline (tokenizer.json minus vocab/merges), and per string the ids
                   with and without special tokens, decode(ids) and decode(ids, skip_special_tokens)
tests/tokenizer/ replays every string and requires exact equality.
"""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fixtures  # noqa: E402

SEED = 20260403
TARGET = 3200

MULTILINGUAL = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How's it going? I'm fine; you're late, they'll see, we'd go.",
    "Ünïcödé façade naïve coöperate résumé Straße Ærøskøbing",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Γαζέες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ στὸ χρυσαφὶ ξέφωτο.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
    "私はガラスを食べられます。それは私を傷つけません。カタカナ ひらがな 漢字",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني. مرحبا بالعالم!",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती। नमस्ते दुनिया",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ สวัสดีชาวโลก",
    "אני יכול לאכול זכוכית וזה לא מזיק לי.",
    "Tôi có thể ăn thủy tinh mà không hại gì.",
    "Mogę jeść szkło i mi nie szkodzi. Zażółć gęślą jaźń.",
    "ሰማይ አይታረስ ንጉሥ አይከሰስ።",
    "ᚠᛇᚻ᛫ᛒᛦᚦ᛫ᚠᚱᚩᚠᚢᚱ᛫ᚠᛁᚱᚪ᛫ᚷᛖᚻᚹᛦᛚᚳᚢᛗ",
    "Ĉu vi parolas Esperanton? Jes, iomete.",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ combining marks",
]
EMOJI = [
    "😀😃😄😁", "👍🏽 👍🏿", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🧑🏻‍💻 coder", "❤️‍🔥", "🇯🇵🇺🇸🇫🇷",
    "e\u0301 vs é", "x\u200by zero width", "a\u200db", "\ufeffbom", "😀\u200d", "🤷‍♀️🤦🏾‍♂️", "1️⃣2️⃣#️⃣",
]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * 2).collect(); }",
    "const x = async () => { await fetch('/api?q=1&b=2'); };",
    "    indented with spaces\n\t\tand tabs\n",
    "<div class=\"a\"><span>text</span></div>",
    "$ ls -la | grep '^d' && echo \"done\" > /dev/null 2>&1",
    "x = [1, 2, 3]\ny = {'a': 1, \"b\": [True, None]}\n",
]
JSONS = [
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}]',
    '{"a":1,"b":[1,2,{"c":"d"}],"e":"\\u00e9\\n"}',
    '{\n  "nested": {\n    "deep": [true, false, null]\n  }\n}',
]
WHITESPACE = [" ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", " \n ", "\r\n", "\u00a0", "\u3000", " \t \n"]
SPECIAL_LOOKALIKES = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<bos>", "<eos>", "<pad>",
    "<start_of_turn>", "<end_of_turn>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "[INST]", "[/INST]", "<<SYS>>", "<mask>", "<|im_start", "im_start|>",
]


def random_text(rng, ranges, n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        c = rng.randint(lo, hi)
        if 0xD800 <= c <= 0xDFFF:
            c = 0x41
        out.append(chr(c))
    return "".join(out)


SCRIPT_RANGES = [
    (0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
    (0x1F300, 0x1FAFF), (0x2000, 0x206F), (0x300, 0x36F), (0xFE00, 0xFE0F), (0x10000, 0x1007F),
]


def build_corpus():
    rng = random.Random(SEED)
    base = MULTILINGUAL + EMOJI + CODE + JSONS + WHITESPACE + SPECIAL_LOOKALIKES
    corpus = ["", "a", "A", " a", "a ", "  leading", "trailing  ", "Hello world", " Hello world", "hello\nworld"]
    corpus += base
    # Whitespace and digit runs of many lengths.
    for n in list(range(1, 33)) + [40, 64, 100, 257]:
        corpus += [" " * n, "\n" * n, "\t" * n, "x" + " " * n + "y", "1" * n, "".join(str(i % 10) for i in range(n))]
    for n in range(1, 40):
        corpus.append(str(rng.randint(0, 10 ** n)))
        corpus.append(f"{rng.random() * 10 ** rng.randint(-5, 12):.{rng.randint(0, 9)}f}")
    # Special-token lookalikes inside text, with and without surrounding spaces.
    for tok in SPECIAL_LOOKALIKES:
        corpus += [f"text {tok} text", f"{tok}user\nhi{tok}", f" {tok} ", f"a{tok}b", tok + tok]
    pools = [MULTILINGUAL, EMOJI, CODE, JSONS, WHITESPACE, SPECIAL_LOOKALIKES]
    seps = ["", " ", "  ", "\n", "\n\n", "\t", " \n", "   "]
    while len(corpus) < TARGET:
        kind = rng.random()
        if kind < 0.45:
            parts = [rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 4))]
            s = "".join(p + rng.choice(seps) for p in parts)
            if rng.random() < 0.3:
                cut = rng.randint(0, len(s))
                s = s[:cut]
        elif kind < 0.75:
            s = random_text(rng, SCRIPT_RANGES, rng.randint(1, 40))
        elif kind < 0.9:
            words = [random_text(rng, [rng.choice(SCRIPT_RANGES)], rng.randint(1, 8)) for _ in range(rng.randint(1, 8))]
            s = "".join(w + rng.choice(seps) for w in words)
        else:
            s = rng.choice(SPECIAL_LOOKALIKES) + random_text(rng, SCRIPT_RANGES[:3], rng.randint(0, 10)) + rng.choice(SPECIAL_LOOKALIKES)
        corpus.append(s)
    return corpus


def pipeline_of(tok):
    j = json.loads(tok.backend_tokenizer.to_str())
    j["model"].pop("vocab", None)
    j["model"].pop("merges", None)
    j.pop("truncation", None)
    j.pop("padding", None)
    return j


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    import tokenizers
    import transformers

    out = os.path.join(sys.argv[1], "tokenizer")
    os.makedirs(out, exist_ok=True)
    corpus = build_corpus()
    versions = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}
    with open(os.path.join(out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump({"seed": SEED, "versions": versions, "strings": corpus}, f, ensure_ascii=False)
    for name in fixtures.NAMES + list(fixtures.GGUF_REBUILT):
        tok = fixtures.load(name)
        original = fixtures.load(fixtures.GGUF_ORIGINAL[name]) if name in fixtures.GGUF_ORIGINAL else None
        cases = []
        for s in corpus:
            ids = tok.encode(s, add_special_tokens=True)
            plain = tok.encode(s, add_special_tokens=False)
            cases.append({
                "ids": ids,
                "ids_plain": plain,
                "decode": tok.decode(ids),
                "decode_skip": tok.decode(ids, skip_special_tokens=True),
            })
            if original is not None:  # the original HF tokenizer's ids for the same string
                cases[-1]["ids_original"] = original.encode(s, add_special_tokens=True)
        rec = {
            "name": name,
            "dir": fixtures.rebuilt_dir(name) if name in fixtures.GGUF_REBUILT else fixtures.fixture_dir(name),
            "class": type(tok).__name__,
            "special_tokens_map": {k: str(v) for k, v in tok.special_tokens_map.items()},
            "eos_token_id": tok.eos_token_id,
            "vocab_size": tok.backend_tokenizer.get_vocab_size(with_added_tokens=True),
            "pipeline": pipeline_of(tok),
            "cases": cases,
        }
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False)
        print(f"tokenizer goldens: {name}: {len(cases)} strings ({type(tok).__name__})")


if __name__ == "__main__":
    main()
