"""Goldens for src/cache's batched caches: drive mlx-lm's BatchKVCache / BatchRotatingKVCache.

Usage: .venv/bin/python tools/oracle/batch_cache_goldens.py OUTDIR
Writes OUTDIR/batch_cache/<scenario>.safetensors, replayed verbatim by
tests/cache/batch_cache_golden_test.cpp.

A scenario is a list of ops (JSON in the metadata field "ops"; "dims" holds H DK DV) over named
caches:
  batch    {name, kind: kv|rot, max_size, left_padding}  BatchKVCache / BatchRotatingKVCache
  solo     {name, kind, max_size}                        KVCache / RotatingKVCache
  update   {name, S}                   update_and_fetch with random (B, H, S, D) inputs
  prepare  {name, left_padding | lengths + right_padding}
  finalize {name}   trim {name, n}   filter {name, keep}   extend {name, other}
  extract  {name, row, into}           merge {names, into}  (the kind's merge classmethod)
  probe    {of: <op>, cpp: ok|throws}  the op run on a deepcopy; records whether mlx-lm raised
                                       ("<i>.mlx_lm" metadata: "ok" or the exception)
Step i records, for every cache the op touched (keys "<i>.<cache>.<field>"): the full state
buffers (keys, values), offsets and left_padding (int32; [offset] for a solo cache), scalars
int64 [idx, tokens seen (_offset), rotated, batch size, empty, size] and, for each
MASK_QUERIES (n, window or 0), the mask: "mask.n<n>.w<w>" plus ".kind" (0 None, 1 causal,
2 array). An update also records its inputs ("<i>.in_keys"/"<i>.in_values") and the fetched
keys/values ("<i>.keys"/"<i>.values"). Where mlx-lm's mask is wrong (a wrapped ring's
multi-token mask, see fixed_rotated_mask) the golden holds the right one and mlx-lm's as
"<mask>.mlx_lm".
"""

import copy
import json
import os
import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache, BatchRotatingKVCache, KVCache, RotatingKVCache

MASK_QUERIES = [(1, 0), (1, 2), (3, 0), (3, 2)]
H, DK, DV = 2, 4, 3


def snapshot(a):
    # mlx-lm writes into buffers it returned earlier (slice assignment); copy through numpy.
    return mx.array(np.array(a))


def batch(name, kind, left_padding, max_size=0):
    return {"op": "batch", "name": name, "kind": kind, "max_size": max_size, "left_padding": left_padding}


def solo(name, kind, max_size=0):
    return {"op": "solo", "name": name, "kind": kind, "max_size": max_size}


def upd(name, *sizes):
    return [{"op": "update", "name": name, "S": s} for s in sizes]


def op(kind, name, **kw):
    return {"op": kind, "name": name, **kw}


def probe(of, cpp):
    return {"op": "probe", "of": of, "cpp": cpp}


def rows(cache):
    return cache.offset.shape[0] if isinstance(cache, (BatchKVCache, BatchRotatingKVCache)) else 1


def fixed_rotated_mask(cache, n, w):
    """BatchRotatingKVCache.make_mask for n > 1 on a wrapped ring, as it should be.

    The update un-rotates the ring first (_idx becomes the ring's length) and then trims;
    mlx-lm's mask uses the write position instead and hides valid keys of left-padded rows.
    Where the two differ the golden holds this mask and mlx-lm's as "<mask>.mlx_lm".
    """
    if not isinstance(cache, BatchRotatingKVCache) or n == 1 or not cache.rotated:
        return None
    c = copy.copy(cache)
    c._idx = cache.keys.shape[2]
    return c.make_mask(n, window_size=(w or None))


def record_cache(out, p, cache):
    if cache.keys is not None:
        out[p + ".keys"], out[p + ".values"] = snapshot(cache.keys), snapshot(cache.values)
    if isinstance(cache, (BatchKVCache, BatchRotatingKVCache)):
        out[p + ".offsets"] = snapshot(cache.offset.astype(mx.int32))
        out[p + ".left_padding"] = snapshot(cache.left_padding.astype(mx.int32))
        rot = isinstance(cache, BatchRotatingKVCache)
        seen = cache._offset if rot else cache._idx
        scalars = [cache._idx, seen, int(rot and cache.rotated), rows(cache)]
    else:
        out[p + ".offsets"] = mx.array([cache.offset], dtype=mx.int32)
        idx = cache._idx if isinstance(cache, RotatingKVCache) else cache.offset
        scalars = [idx, cache.offset, 0, 1]
    out[p + ".scalars"] = mx.array(scalars + [int(cache.empty()), cache.size()], dtype=mx.int64)
    for n, w in MASK_QUERIES:
        m = cache.make_mask(n, window_size=(w or None), return_array=False)
        name = f"{p}.mask.n{n}.w{w}"
        fixed = fixed_rotated_mask(cache, n, w)
        if fixed is not None and not mx.array_equal(fixed, m).item():
            out[name + ".mlx_lm"] = snapshot(m)
            m = fixed
        kind = 0 if m is None else 1 if isinstance(m, str) else 2
        if kind == 2:
            out[name] = snapshot(m)
        out[name + ".kind"] = mx.array([kind], dtype=mx.int32)


def apply(caches, o, out, p):
    """Runs one op; returns the names of the caches it touched."""
    name = o.get("name")
    c = caches.get(name)
    kind = o["op"]
    if kind == "batch":
        cls_args = (o["max_size"],) if o["kind"] == "rot" else ()
        cls = BatchRotatingKVCache if o["kind"] == "rot" else BatchKVCache
        caches[name] = cls(*cls_args, o["left_padding"])
    elif kind == "solo":
        caches[name] = RotatingKVCache(o["max_size"]) if o["kind"] == "rot" else KVCache()
    elif kind == "update":
        b = o.get("rows", rows(c))
        keys = mx.random.normal((b, H, o["S"], DK))
        values = mx.random.normal((b, H, o["S"], DV))
        # Snapshots: a cache may adopt its first input and later write into it.
        if out is not None:
            out[p + ".in_keys"], out[p + ".in_values"] = snapshot(keys), snapshot(values)
        k, v = c.update_and_fetch(keys, values)
        if out is not None:
            out[p + ".keys"], out[p + ".values"] = snapshot(k), snapshot(v)
    elif kind == "prepare":
        c.prepare(**{k: o[k] for k in ("left_padding", "lengths", "right_padding") if k in o})
    elif kind == "finalize":
        c.finalize()
    elif kind == "trim":
        out[p + ".trimmed"] = mx.array([c.trim(o["n"])], dtype=mx.int32)
    elif kind == "filter":
        c.filter(o["keep"])
    elif kind == "extend":
        c.extend(caches[o["other"]])
        return [name, o["other"]]
    elif kind == "extract":
        caches[o["into"]] = c.extract(o["row"])
        return [name, o["into"]]
    elif kind == "merge":
        solos = [caches[n] for n in o["names"]]
        rot = bool(solos) and isinstance(solos[0], RotatingKVCache)
        cls = BatchRotatingKVCache if rot else BatchKVCache
        caches[o["into"]] = cls.merge(solos)
        return [o["into"]]
    else:
        raise ValueError(f"unknown op {o}")
    return [name]


def run_scenario(ops):
    caches, out, meta = {}, {}, {}
    for i, o in enumerate(ops):
        p = str(i)
        if o["op"] == "probe":
            trial = copy.deepcopy(caches)
            try:
                apply(trial, o["of"], None, p)
                meta[p + ".mlx_lm"] = "ok"
            except Exception as e:  # noqa: BLE001 - any refusal is the finding
                meta[p + ".mlx_lm"] = f"{type(e).__name__}: {e}"
            continue
        for n in apply(caches, o, out, p):
            record_cache(out, f"{p}.{n}", caches[n])
    meta["ops"] = json.dumps(ops)
    meta["mask_queries"] = " ".join(f"{n}:{w}" for n, w in MASK_QUERIES)
    meta["dims"] = f"{H} {DK} {DV}"
    return out, meta


def scenarios():
    s = {}
    # Left padding, multi- and single-token updates, trim, filter with a padding shift, extract.
    s["kv_left_padding"] = [
        batch("A", "kv", [2, 0, 1]), *upd("A", 4, 1, 1, 3), op("trim", "A", n=2), *upd("A", 1),
        op("filter", "A", keep=[2, 0]), *upd("A", 1),
        op("extract", "A", row=0, into="x0"), op("extract", "A", row=1, into="x1"), *upd("x1", 1, 2),
        op("filter", "A", keep=[1]), *upd("A", 1),
    ]
    # Right-padded prompts prefilled in chunks, then finalize rolls the padding to the left.
    s["kv_prepare"] = [
        batch("A", "kv", [0, 0, 0]), op("prepare", "A", left_padding=[1, 0, 2]),
        op("prepare", "A", lengths=[5, 3, 1], right_padding=[0, 2, 4]), *upd("A", 3, 2),
        op("finalize", "A"), *upd("A", 1, 1),
        *[op("extract", "A", row=r, into=f"x{r}") for r in range(3)], *upd("x2", 1),
    ]
    # Joining a running batch: prefilled batches, a batch not yet updated, an empty batch.
    s["kv_extend"] = [
        batch("A", "kv", [1, 0]), *upd("A", 3, 1, 1), batch("B", "kv", [0, 2]), *upd("B", 6),
        op("extend", "A", other="B"), *upd("A", 1), batch("N", "kv", [0]), op("extend", "A", other="N"),
        *upd("A", 1), op("filter", "A", keep=[1, 4, 2]), *upd("A", 1),
        *[op("extract", "A", row=r, into=f"x{r}") for r in range(3)],
        batch("P", "kv", [0]), batch("Q", "kv", [1]), op("extend", "P", other="Q"), *upd("P", 2),
        # Batches of no rows. mlx-lm's left padding of [] is float32 and poisons what it joins:
        # extract and a shifting filter raise there afterwards.
        batch("E", "kv", []), op("extend", "A", other="E"), *upd("A", 1),
        probe(op("extract", "A", row=0, into="y"), "ok"), probe(op("filter", "A", keep=[0, 1]), "ok"),
        batch("Z", "kv", []), op("extend", "Z", other="P"), *upd("Z", 2),
        probe(op("extract", "Z", row=1, into="y"), "ok"),
    ]
    # Solo KVCaches (one empty, one past a 256-row step) merged into a batch.
    s["kv_merge"] = [
        solo("s0", "kv"), *upd("s0", 5, 1), solo("s1", "kv"), *upd("s1", 2), solo("s2", "kv"),
        solo("s3", "kv"), *upd("s3", 257, 1),
        op("merge", None, names=["s0", "s1", "s2", "s3"], into="M"), *upd("M", 1, 2),
        *[op("extract", "M", row=r, into=f"x{r}") for r in range(4)], *upd("x2", 1),
        solo("e0", "kv"), solo("e1", "kv"), op("merge", None, names=["e0", "e1"], into="E"), *upd("E", 2),
    ]
    # The ring wraps (max_size 5 < the sequences); then filter, extend and extract after the wrap.
    s["rot_wrap"] = [
        batch("R", "rot", [1, 0, 2], max_size=5), *upd("R", 4), *upd("R", *[1] * 7),
        op("filter", "R", keep=[2, 0]), *upd("R", 1),
        batch("B", "rot", [0, 1], max_size=5), *upd("B", 3),
        op("extend", "R", other="B"), *upd("R", 1, 1, 1, 1),
        *[op("extract", "R", row=r, into=f"x{r}") for r in range(4)], *upd("x0", 1, 1, 2),
        batch("N", "rot", [0], max_size=5), op("extend", "R", other="N"), *upd("R", 1),
        *upd("R", 3), *upd("R", 1, 1),
    ]
    # Two wrapped rings at the same write position join without un-rotating.
    s["rot_wrap_same_idx"] = [
        batch("A", "rot", [0, 2], max_size=4), *upd("A", 3, 1, 1, 1), batch("B", "rot", [1], max_size=4),
        *upd("B", 3, 1, 1, 1), op("extend", "A", other="B"), *upd("A", 1, 1),
        *[op("extract", "A", row=r, into=f"x{r}") for r in range(3)],
        batch("Z", "rot", [], max_size=4), op("extend", "Z", other="A"), *upd("Z", 1),
        probe(op("extract", "Z", row=1, into="y"), "ok"),
    ]
    # Chunked prefill of right-padded prompts, longer than the ring, then decode and trim.
    s["rot_prepare"] = [
        batch("R", "rot", [0, 0, 0], max_size=8), op("prepare", "R", left_padding=[0, 1, 0]),
        op("prepare", "R", lengths=[10, 6, 3], right_padding=[0, 4, 7]), *upd("R", 4, 4, 2),
        op("finalize", "R"), *upd("R", *[1] * 6),
        *[op("extract", "R", row=r, into=f"x{r}") for r in range(3)],
        batch("T", "rot", [1, 0], max_size=16), *upd("T", 4, 1), op("trim", "T", n=2), *upd("T", 1, 3),
    ]
    # Solo RotatingKVCaches: wrapped in place, over-long after a concat, growing, empty.
    s["rot_merge"] = [
        solo("r0", "rot", 6), *upd("r0", 3, *[1] * 6), solo("r1", "rot", 6), *upd("r1", 8),
        solo("r2", "rot", 6), *upd("r2", 1, 1), solo("r3", "rot", 6), solo("r4", "rot", 6), *upd("r4", 2),
        op("merge", None, names=["r0", "r1", "r2", "r3", "r4"], into="M"), *upd("M", 1, 1, 1, 1, 1),
        op("filter", "M", keep=[4, 0, 2]), *upd("M", 1),
        *[op("extract", "M", row=r, into=f"x{r}") for r in range(3)], *upd("x1", 1, 1),
        solo("w", "rot", 6), *upd("w", 2, *[1] * 7), op("merge", None, names=["w"], into="W"),
        op("extend", "M", other="W"), *upd("M", 1, 2, 1),
        solo("e0", "rot", 6), op("merge", None, names=["e0"], into="E"), *upd("E", 1),
    ]
    # What mlx-lm refuses (or wrongly accepts), and what we do instead.
    s["probes"] = [
        batch("A", "kv", [1, 0]), *upd("A", 3), batch("R", "rot", [0, 1], max_size=4), *upd("R", 3, 1, 1, 1),
        batch("F", "kv", [0]), batch("G", "rot", [0, 0], max_size=4),
        op("prepare", "F", lengths=[3], right_padding=[2]), op("prepare", "G", lengths=[3, 2], right_padding=[0, 1]),
        probe(op("filter", "A", keep=[]), "ok"), probe(op("filter", "R", keep=[]), "ok"),
        probe(op("filter", "A", keep=[2]), "throws"), probe(op("filter", "R", keep=[-1]), "throws"),
        probe(op("prepare", "A", left_padding=[1, 1]), "throws"),
        probe(op("prepare", "R", left_padding=[1, 1]), "throws"),
        probe(op("extend", "A", other="R"), "throws"), probe(op("extend", "R", other="A"), "throws"),
        probe(op("extract", "F", row=0, into="y"), "ok"), probe(op("extract", "A", row=2, into="y"), "throws"),
        probe(op("finalize", "F"), "ok"), probe(op("update", "G", S=1), "throws"),
        probe(op("update", "A", S=1, rows=3), "throws"), probe(op("update", "R", S=1, rows=1), "throws"),
        probe(op("merge", None, names=[], into="y"), "throws"),
    ]
    return s


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: batch_cache_goldens.py OUTDIR")
    outdir = os.path.join(sys.argv[1], "batch_cache")
    os.makedirs(outdir, exist_ok=True)
    mx.random.seed(1717)
    all_s = scenarios()
    for name, ops in all_s.items():
        out, meta = run_scenario(ops)
        mx.save_safetensors(os.path.join(outdir, name + ".safetensors"), out, meta)
        for k, v in sorted(meta.items()):
            if k.endswith(".mlx_lm"):
                print(f"{name} step {k.split('.')[0]}: {json.dumps(ops[int(k.split('.')[0])]['of'])} -> mlx-lm {v}")
        for k in sorted(out):
            if k.endswith(".mlx_lm"):
                print(f"{name}: {k[: -len('.mlx_lm')]} differs from mlx-lm's (a wrapped ring's multi-token mask)")
    print(f"wrote {len(all_s)} files to {outdir}")


if __name__ == "__main__":
    main()
