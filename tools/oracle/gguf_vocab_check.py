"""Checks our GGUF -> tokenizer.json rebuild against the original Hugging Face tokenizers.

For every vocabulary-only GGUF in the fixture folder (llama.cpp's test data: NAME.gguf with
NAME.gguf.inp strings and NAME.gguf.out ids from the original HF tokenizer), runs
`mlxcpp convert --gguf NAME.gguf --out DIR --tokenizer-only`, loads DIR/tokenizer.json with the
reference `tokenizers` library, encodes each string without special tokens and compares the ids.

usage: gguf_vocab_check.py MLXCPP_BINARY FIXTURE_DIR WORK_DIR
Exit status 1 when a supported vocabulary mismatches or a converter run fails unexpectedly.
"""

import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer

SEP = "\n__ggml_vocab_test__\n"


def read_cases(inp: Path, out: Path):
    text = inp.read_text(encoding="utf-8")
    strings = text.split(SEP)
    if strings and strings[-1] == "":
        strings.pop()
    ids = [[int(x) for x in line.split()] for line in out.read_text(encoding="utf-8").split("\n")]
    ids = ids[: len(strings)]
    if len(ids) != len(strings):
        raise SystemExit(f"{inp}: {len(strings)} strings but {len(ids)} id lines")
    return list(zip(strings, ids))


def main() -> int:
    binary, fixtures, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    failed, unsupported, summary = [], [], []
    for gguf in sorted(fixtures.glob("*.gguf")):
        inp, out = Path(str(gguf) + ".inp"), Path(str(gguf) + ".out")
        name = gguf.name.removeprefix("ggml-vocab-").removesuffix(".gguf")
        dest = work / name
        run = subprocess.run(
            [str(binary), "convert", "--gguf", str(gguf), "--out", str(dest), "--tokenizer-only", "--force"],
            capture_output=True, text=True)
        if run.returncode != 0:
            msg = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"
            if "not supported" in msg:
                unsupported.append(name)
                summary.append(f"{name:16s} unsupported: {msg}")
            else:
                failed.append(name)
                summary.append(f"{name:16s} CONVERT FAILED: {msg}")
            continue
        if not inp.exists() or not out.exists():
            summary.append(f"{name:16s} converted (no .inp/.out to check)")
            continue
        tok = Tokenizer.from_file(str(dest / "tokenizer.json"))
        cases = read_cases(inp, out)
        bad = []
        for text, want in cases:
            got = tok.encode(text, add_special_tokens=False).ids
            if got != want:
                bad.append((text, want, got))
        summary.append(f"{name:16s} {len(cases) - len(bad)}/{len(cases)} pass")
        if bad:
            failed.append(name)
            for text, want, got in bad[:5]:
                summary.append(f"    {text!r}\n      want {want}\n      got  {got}")
    print("\n".join(summary))
    if unsupported:
        print("unsupported vocabularies:", ", ".join(unsupported))
    if failed:
        print("FAILED:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
