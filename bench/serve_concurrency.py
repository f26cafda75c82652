"""bench/serve's concurrency part (documented in bench/serve's docstring): rounds of N streaming
clients against one server, and a long prompt joining 8 decoding streams."""
import math
import random
import statistics
import threading
import time
from pathlib import Path

from serve_lib import Cancel, Server, Prompts, free_port, log, stream

MIX_SEED = 20261205
PROMPT_MIN, PROMPT_MAX = 64, 2000  # prompt tokens, log-uniform (many short chats, some long documents)
OUT_MIN, OUT_MAX = 16, 128         # max_tokens, uniform
JOIN_STREAMS, JOIN_PROMPT, JOIN_OUT, JOIN_SHORT = 8, 2000, 512, 64
SLOT_CTX = 3072                    # llama-server context per slot: the longest prompt + max_tokens + template
CHAT_OVERHEAD = 14                 # template tokens around the user text (SmolLM2's ChatML: ~12)
MLXLM_WHY = ("MLX's CPU prefill is ~9 tok/s on this VM, batched or not, its decode 5-13 tok/s: 8 clients of "
             "64-token prompts take ~2 minutes")
ENGINE_NAMES = {"mlxcpp": "mlxcpp", "mlxlm": "mlx-lm", "llamacpp": "llama.cpp"}


def quantile(xs, q):
    """Nearest rank (p99 of fewer than 100 samples = the largest)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(len(s) * q) - 1))]


class Sizer:
    """Word counts for a target prompt length, from the snapshot's tokenizer (the prompts' real
    lengths, as each engine counts them, are printed from usage)."""

    def __init__(self, snap, chat):
        text = Prompts(chat).sized(0, 2000, 1)
        base = Prompts(chat).sized(0, 0, 1)
        try:
            from tokenizers import Tokenizer
            tok = Tokenizer.from_file(str(Path(snap) / "tokenizer.json"))
            def count(req):
                parts = [m["content"] for m in req["messages"]] if chat else [req["prompt"]]
                return sum(len(tok.encode(p, add_special_tokens=False).ids) for p in parts)
            n_full, n_base = count(text), count(base)
        except Exception:  # noqa: BLE001 - a rough default (about 1.3 tokens a word) still spreads the mix
            n_base, n_full = 30, 30 + 2600
        self.per_word = (n_full - n_base) / 2000
        self.base = n_base + (CHAT_OVERHEAD if chat else 1)

    def words(self, tokens):
        return max(0, round((tokens - self.base) / self.per_word))


def mix(n_requests, seed):
    """(prompt tokens, max_tokens) per request; the same list for every engine at one client count."""
    rng = random.Random(seed)
    lo, hi = math.log(PROMPT_MIN), math.log(PROMPT_MAX)
    return [(round(math.exp(rng.uniform(lo, hi))), rng.randint(OUT_MIN, OUT_MAX)) for _ in range(n_requests)]


def run_round(port, reqs, clients, soft_s, hard_s, timeout_s, extra):
    """`clients` threads take requests (body, max_tokens) in order until all are taken or soft_s
    has passed (the first wave always goes); at hard_s every open stream is cut. Returns the results
    (dicts; {"error": ...} for a failed request, None for one never sent) and the wall time."""
    results = [None] * len(reqs)
    cancel, lock, nxt = Cancel(), threading.Lock(), [0]
    ends = []
    t0 = time.perf_counter()

    def client():
        while True:
            with lock:
                i = nxt[0]
                if i >= len(reqs) or (i >= clients and time.perf_counter() - t0 > soft_s) or cancel.is_set:
                    return
                nxt[0] += 1
            body, max_tokens = reqs[i]
            left = t0 + hard_s - time.perf_counter()
            try:
                results[i] = stream(port, body, max_tokens, max(1.0, min(timeout_s, left)), extra, cancel,
                                    allow_empty=True)
            except Exception as e:  # noqa: BLE001 - one failed request is counted, the round goes on
                results[i] = {"error": f"{type(e).__name__}: {e}"}
            with lock:
                ends.append(time.perf_counter())

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, t0 + hard_s - time.perf_counter()))
    if any(t.is_alive() for t in threads):
        log(f"   round past its {hard_s:.0f} s bound: cutting the open streams")
        cancel.set()
        for t in threads:
            t.join(10)
    wall = (max(ends) if ends else time.perf_counter()) - t0
    return results, wall


def gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def summarize(results, wall):
    ok = [r for r in results if r and "error" not in r]
    done = [r for r in ok if r["t_first"] is not None and not r["cancelled"]]
    tokens = sum((r["usage"] or {}).get("completion_tokens") or r["chunks"] for r in ok)
    itl = [g for r in ok for g in gaps(r["times"])]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    prompt = [(r["usage"] or {}).get("prompt_tokens") for r in ok if (r["usage"] or {}).get("prompt_tokens")]
    errors = [r["error"] for r in results if r and "error" in r]
    cut = sum(1 for r in ok if r["cancelled"])
    empty = sum(1 for r in ok if r["t_first"] is None and not r["cancelled"])
    errors += [f"{cut} cut at the round's bound"] if cut else []
    errors += [f"{empty} answered no content (EOS at once)"] if empty else []
    return {"sent": sum(1 for r in results if r), "done": len(done), "tokens": tokens, "wall": wall,
            "agg": tokens / wall if wall > 0 else None, "ttft50": quantile(ttft, 0.5),
            "ttft99": quantile(ttft, 0.99), "itl50": quantile(itl, 0.5), "itl99": quantile(itl, 0.99),
            "prompt": prompt, "out_per_req": tokens / len(ok) if ok else None, "errors": errors}


class Concurrency:
    """One model: every engine at every client count, then the joining long prompt; the servers are
    started per client count where their slots must match it (llama-server -np, mlxcpp --max-batch)."""

    def __init__(self, label, snap, chat, engines, a, argv_for, per_count, logdir):
        self.label, self.snap, self.chat, self.a = label, snap, chat, a
        self.engines = list(engines)
        self.argv_for, self.per_count, self.logdir = argv_for, per_count, logdir
        self.prompts, self.sizer = Prompts(chat), Sizer(snap, chat)
        self.servers = {}  # engine -> (slots, Server)
        self.rows = []     # (engine, mix, clients, summary)
        self.joins = {}    # engine -> join summary, or the reason it was skipped
        self.errors = {e: [] for e in engines}

    def extra(self, eng):
        return None if eng == "mlxlm" else {"ignore_eos": True}

    def server(self, eng, slots):
        key = slots if eng in self.per_count else None
        if eng in self.servers and self.servers[eng][0] == key:
            return self.servers[eng][1]
        self.stop(eng)
        s = Server(eng, [], free_port(), self.logdir)
        s.argv = self.argv_for(eng, s.port, key)
        try:
            ready = s.start(self.a.timeout_s)
            stream(s.port, self.prompts.short(0), 1, self.a.timeout_s)  # warm-up
        except Exception:
            s.stop()
            raise
        log(f"   {eng} up ({'slots ' + str(key) if key else 'one server for all counts'}): ready {ready:.2f} s")
        self.servers[eng] = (key, s)
        return s

    def stop(self, eng):
        if eng in self.servers:
            self.servers.pop(eng)[1].stop()

    def requests(self, n_clients, cap=None):
        """The mix at one client count: max(min, per-client x N) requests, or one wave (N) capped."""
        count = n_clients if cap else max(self.a.round_min, self.a.round_per_client * n_clients)
        out = []
        for i, (p, mt) in enumerate(mix(count, MIX_SEED + n_clients)):
            words = self.sizer.words(min(p, cap) if cap else p)
            lead = 1000 * n_clients + i + (500 if cap else 0)  # no prefix shared with another round's
            out.append((self.prompts.sized(lead, words, MIX_SEED + i), mt))
        return out

    def plan(self, eng):
        """(mix name, cap) rounds of one engine; mlxcpp also runs mlx-lm's capped wave, for that ratio."""
        if eng == "mlxlm":
            return [("capped", self.a.mlxlm_max_prompt)]
        if eng == "mlxcpp" and "mlxlm" in self.engines:
            return [("mix", None), ("capped", self.a.mlxlm_max_prompt)]
        return [("mix", None)]

    def run(self):
        log(f"== {self.label}: concurrency, clients {self.a.clients}")
        try:
            for k, n in enumerate(self.a.clients):  # the engines' order rotates with the count (drift)
                live = list(self.engines)
                r = k % len(live) if live else 0
                for eng in live[r:] + live[:r]:
                    self.round(eng, n)
            self.join_all()
        finally:
            for eng in list(self.servers):
                self.stop(eng)
        return self

    def round(self, eng, n):
        try:
            s = self.server(eng, n)
        except Exception as e:  # noqa: BLE001 - the engine is dropped, the table says why
            self.errors[eng].append(f"start (slots {n}): {e}")
            self.engines.remove(eng)
            log(f"   {eng}: start failed: {e}")
            return
        for name, cap in self.plan(eng):
            reqs = self.requests(n, cap)
            res, wall = run_round(s.port, reqs, n, self.a.round_s, self.a.round_s + self.a.timeout_s,
                                  self.a.timeout_s, self.extra(eng))
            sm = summarize(res, wall)
            self.rows.append((eng, name, n, sm))
            log(f"   {eng} {name} x{n}: {sm['done']} of {len(reqs)} requests done, {sm['tokens']} tokens in "
                f"{wall:.1f} s = {sm['agg'] or 0:.1f} tok/s; TTFT p50 {fmt(sm['ttft50'], 1e3)} ms"
                + (f"; errors: {sm['errors'][:2]}" if sm["errors"] else ""))

    def join_all(self):
        for eng in list(self.engines):
            if eng == "mlxlm" and not self.a.mlxlm_join:
                self.joins[eng] = f"skipped ({JOIN_PROMPT}-token prefill ~4 minutes here; --mlxlm-join runs it)"
                continue
            try:
                s = self.server(eng, JOIN_STREAMS + 1)
                self.joins[eng] = join_test(s.port, self.prompts, self.sizer, self.a, self.extra(eng))
                j = self.joins[eng]
                log(f"   {eng} join: {j['running']}/{JOIN_STREAMS} running, ITL p50 {fmt(j['itl50'], 1e3)} "
                    f"p99 {fmt(j['itl99'], 1e3)} ms over {j['window']:.1f} s")
            except Exception as e:  # noqa: BLE001
                self.joins[eng] = f"failed: {e}"
                log(f"   {eng} join failed: {e}")
            self.stop(eng)


def join_test(port, prompts, sizer, a, extra):
    """8 streams decoding (short prompts, JOIN_OUT tokens); once they have settled (settle()) a
    JOIN_PROMPT-token prompt joins; the window runs from its send to its first token. Inter-token
    gaps of the streams that were mid-answer at the join, overlapping the window, against their
    gaps before it."""
    cancel = Cancel()
    outs = [{"times": []} for _ in range(JOIN_STREAMS)]
    bg_timeout = a.join_window_s + 4 * a.join_settle_s + 30

    def bg(k):
        try:
            stream(port, prompts.sized(9000 + k, sizer.words(JOIN_SHORT), 77 + k), JOIN_OUT, bg_timeout, extra,
                   cancel, outs[k], allow_empty=True)
        except Exception as e:  # noqa: BLE001
            outs[k]["error"] = str(e)

    threads = [threading.Thread(target=bg, args=(k,), daemon=True) for k in range(JOIN_STREAMS)]
    for t in threads:
        t.start()
    settle(outs, a.join_settle_s)
    time.sleep(0.5)  # a baseline of steady decode before the join
    long_out = {}
    long_body = prompts.sized(9999, sizer.words(JOIN_PROMPT), 4242)
    t_join = time.perf_counter()
    lt = threading.Thread(target=lambda: _try(stream, port, long_body, 16, a.join_window_s, extra, cancel,
                                              long_out, True), daemon=True)
    lt.start()
    while lt.is_alive() and long_out.get("t_first") is None and time.perf_counter() - t_join < a.join_window_s:
        time.sleep(0.01)
    w1 = long_out.get("t_first") or time.perf_counter()
    time.sleep(0.3)
    t_cut = time.perf_counter()
    cancel.set()
    for t in threads + [lt]:
        t.join(10)
    started = [o for o in outs if any(x < t_join for x in o["times"])]
    ended = [o for o in started if o.get("finish") and o["t_last"] is not None and o["t_last"] < t_join]
    running = [o for o in started if o not in ended]
    win, base = [], []
    for o in running:
        ts = list(o["times"])
        if not o.get("finish") and ts and ts[-1] < w1:
            ts.append(t_cut)  # a stream stalled through the window: the stall so far counts
        for x, y in zip(ts, ts[1:]):
            (win if y > t_join and x < w1 else base if y <= t_join else []).append(y - x)
    return {"running": len(running), "ended": len(ended), "window": w1 - t_join, "long_ttft": long_out.get("ttft"),
            "long_tokens": ((long_out.get("usage") or {}).get("prompt_tokens")),
            "itl50": quantile(win, 0.5), "itl99": quantile(win, 0.99), "base50": quantile(base, 0.5),
            "n_gaps": len(win), "long_ok": long_out.get("t_first") is not None}


def settle(outs, settle_s):
    """Until every stream has 8 deltas; after settle_s, as soon as one is mid-answer and no stream
    has started for 2 s (a server running them in turn, or a slow one); at most 4 x settle_s."""
    t0 = changed = time.perf_counter()
    started = 0
    while (now := time.perf_counter()) - t0 < 4 * settle_s:
        if all(len(o["times"]) >= 8 or o.get("finish") for o in outs):
            return
        n = sum(1 for o in outs if o["times"])
        if n != started:
            started, changed = n, now
        mid = any(o["times"] and not o.get("finish") for o in outs)
        if now - t0 >= settle_s and mid and now - changed >= 2:
            return
        time.sleep(0.05)


def _try(fn, *args):
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the joining prompt's failure shows as no first token
        pass


# --- the table ------------------------------------------------------------------------------------

def fmt(v, scale=1, f="{:.1f}"):
    return f.format(v * scale) if v is not None else "-"


def agg(c, eng, mix_name, n):
    for e, m, k, sm in c.rows:
        if (e, m, k) == (eng, mix_name, n):
            return sm["agg"]
    return None


def ratio(c, peer, n):
    """mlxcpp agg tok/s over the peer's, on the same requests (mlx-lm: the capped wave)."""
    m = "capped" if peer == "mlxlm" else "mix"
    x, y = agg(c, "mlxcpp", m, n), agg(c, peer, m, n)
    return x / y if x and y else None


def print_concurrency(c, a):
    print(f"\n{c.label}  concurrency: prompts {PROMPT_MIN}-{PROMPT_MAX} tokens (log-uniform) and max_tokens "
          f"{OUT_MIN}-{OUT_MAX} (uniform), seed {MIX_SEED}+clients; greedy; ignore_eos sent to mlxcpp and "
          f"llama.cpp; requests per round max({a.round_min}, {a.round_per_client} x clients), new ones "
          f"until {a.round_s:.0f} s")
    if "mlxlm" in a.engines:
        print(f"  mlx-lm: one wave (a request per client), prompts capped at {a.mlxlm_max_prompt} tokens "
              f"({MLXLM_WHY}); mlxcpp runs the same capped wave ('capped') for the mlx-lm ratio")
    print(f"  {'engine':10s}{'mix':>8s}{'clients':>8s}{'done/sent':>10s}{'agg tok/s':>10s}{'TTFT p50':>10s}"
          f"{'TTFT p99':>10s}{'ITL p50':>9s}{'ITL p99':>9s}{'wall s':>8s}{'out/req':>8s}  prompt tokens min/med/max")
    order = list(ENGINE_NAMES)
    for eng, m, n, sm in sorted(c.rows, key=lambda r: (order.index(r[0]), r[1] != "mix", r[2])):
        p = sm["prompt"]
        pr = f"{min(p)}/{statistics.median(p):.0f}/{max(p)}" if p else "-"
        done = f"{sm['done']}/{sm['sent']}"
        ttft = "".join(f"{fmt(sm[k], 1e3, '{:.0f}'):>10s}" for k in ("ttft50", "ttft99"))
        itl = "".join(f"{fmt(sm[k], 1e3):>9s}" for k in ("itl50", "itl99"))
        print(f"  {ENGINE_NAMES[eng]:10s}{m:>8s}{n:>8d}{done:>10s}{fmt(sm['agg']):>10s}{ttft}{itl}"
              f"{sm['wall']:>8.1f}{fmt(sm['out_per_req']):>8s}  {pr}")
    print("  (TTFT and ITL (gaps between one stream's deltas) in ms; agg = completion tokens / round wall time)")
    for peer in ("llamacpp", "mlxlm"):
        got = [f"{n}: {ratio(c, peer, n):.3f}x" for n in a.clients if ratio(c, peer, n)]
        if got:
            print(f"  agg tok/s mlxcpp/{ENGINE_NAMES[peer]}: " + ", ".join(got))
    print(f"  joining prompt: {JOIN_STREAMS} streams decoding ({JOIN_SHORT}-token prompts, max_tokens {JOIN_OUT}), "
          f"one ~{JOIN_PROMPT}-token prompt joins; ITL of the streams running at the join over the window "
          f"(join -> its first token); goal p99 <= 2x p50")
    for eng, j in c.joins.items():
        if isinstance(j, str):
            print(f"  {ENGINE_NAMES[eng]:10s} {j}")
            continue
        r = j["itl99"] / j["itl50"] if j["itl50"] and j["itl99"] else None
        rb = j["itl99"] / j["base50"] if j["base50"] and j["itl99"] else None
        waiting = JOIN_STREAMS - j["running"] - j["ended"]
        queued = "" if j["running"] == JOIN_STREAMS else \
            f" ({j['ended']} had ended (EOS), {waiting} not yet streaming)"
        prompt = f"prompt {j['long_tokens'] or '~' + str(JOIN_PROMPT)} tokens" + \
            ("" if j["long_ok"] else ", no first token")
        print(f"  {ENGINE_NAMES[eng]:10s} running {j['running']}/{JOIN_STREAMS}{queued}, window {j['window']:.2f} s "
              f"({prompt}), "
              f"ITL p50 {fmt(j['itl50'], 1e3)} p99 {fmt(j['itl99'], 1e3)} ms ({j['n_gaps']} gaps; before "
              f"the join p50 {fmt(j['base50'], 1e3)}); p99/p50 {fmt(r, 1, '{:.2f}')}"
              f"{'' if r is None else (' (met)' if r <= 2 else ' (NOT met)')}; window p99 / p50 before the "
              f"join {fmt(rb, 1, '{:.2f}')}")
    for eng, errs in c.errors.items():
        for err in errs:
            print(f"  {ENGINE_NAMES[eng]}: {err}")
    for eng, m, n, sm in c.rows:
        for err in sorted(set(sm["errors"]))[:3]:
            print(f"  {ENGINE_NAMES[eng]} {m} x{n}: {err}")


def last_line_keys(c, clients):
    """The agg ratios of the last line: @8 always, @16 when measured."""
    keys = [("llamacpp", 8)] + ([("llamacpp", 16)] if 16 in clients else []) + [("mlxlm", 8)]
    out = []
    for peer, n in keys:
        v = ratio(c, peer, n) if c else None
        out.append(f"agg_ratio_vs_{peer}@{n}={v:.3f}" if v else f"agg_ratio_vs_{peer}@{n}=nan")
    return out
