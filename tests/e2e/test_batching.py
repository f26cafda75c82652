"""Continuous batching (issue 17), through the official `openai` SDK against the real `mlxcpp serve`
on SmolLM2-135M-Instruct: 16 different streamed requests (prompts up to ~1,000 tokens, greedy and
seeded sampling, stop strings, penalties, logprobs, n=2, chat and completions) run concurrently
must each equal the same request run alone, exactly; clients that hang up mid-stream do not
disturb the others; and the engine goes back to 0 running rows."""
import functools
import math
import random
import subprocess
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from conftest import BINARY, metrics, wait_idle

REQUEST_TIMEOUT = 120  # seconds, per request (the SDK's timeout, and the wait on each thread)

WORDS = ("river stone garden lantern winter copper harbor meadow signal orchard engine canvas "
         "violet thunder marble compass ribbon falcon island candle mirror forest silver ladder "
         "whisper planet saddle bakery glacier pepper tunnel feather museum rocket velvet").split()


def document(seed, words):
    """A deterministic filler document of `words` words (about 1.2-1.5 tokens a word)."""
    rng = random.Random(seed)
    sentences, n = [], 0
    while n < words:
        k = rng.randint(6, 14)
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + ".")
        n += k
    return " ".join(sentences)


def chat_req(content, **kw):
    return ("chat", dict(messages=[{"role": "user", "content": content}], **kw))


def comp_req(prompt, **kw):
    return ("completions", dict(prompt=prompt, **kw))


def build_requests():
    """16 different requests; sampler knobs the SDK has no parameter for go through extra_body."""
    long1, long2, long3 = document(17, 220), document(18, 450), document(19, 780)
    return [
        # Greedy chat, short prompts, different lengths; stop strings, penalties, logprobs.
        chat_req("What is the capital of France? Answer in one sentence.", temperature=0, max_tokens=24),
        chat_req("Name three colors, separated by commas.", temperature=0, max_tokens=12, stop=[","]),
        chat_req("Explain what a rainbow is.", temperature=0, max_tokens=48, logprobs=True, top_logprobs=3),
        chat_req("Write a haiku about the sea.", temperature=0, max_tokens=32, frequency_penalty=0.8,
                 presence_penalty=0.4, stop=["\n\n", "zzz-never"]),
        # Greedy chat on long prompts (about 300, 600 and 1,000 tokens).
        chat_req(long1 + "\n\nSummarize the text above in one sentence.", temperature=0, max_tokens=20),
        chat_req(long2 + "\n\nWhich word appears most often above?", temperature=0, max_tokens=16,
                 logprobs=True, top_logprobs=2),
        chat_req(long3 + "\n\nWrite a title for the text above.", temperature=0, max_tokens=8),
        # Seeded sampling, each with its own seed and sampler.
        chat_req("Tell me a short story about a dragon.", temperature=0.8, top_p=0.9, seed=101, max_tokens=64),
        chat_req("Give me a name for a cat.", temperature=1.0, seed=202, max_tokens=16,
                 extra_body={"top_k": 40}),
        chat_req("Describe a sunset.", temperature=0.7, seed=303, max_tokens=40,
                 extra_body={"min_p": 0.05}, stop=["."]),
        chat_req("List some fruits.", temperature=0.9, top_p=0.95, seed=404, max_tokens=24, n=2,
                 presence_penalty=0.5),
        chat_req(long1 + "\n\nWhat is this text about?", temperature=0.75, seed=505, max_tokens=28,
                 logprobs=True, top_logprobs=4, extra_body={"top_k": 20, "min_p": 0.02}),
        # /v1/completions: raw prompts, greedy and sampled.
        comp_req("The capital of France is", temperature=0, max_tokens=10),
        comp_req("Once upon a time, in a small village,", temperature=0, max_tokens=40, logprobs=2,
                 frequency_penalty=0.5, stop=["ability to h"]),
        comp_req("def fibonacci(n):", temperature=0.85, seed=606, max_tokens=32, stop=["\n\n"], n=2,
                 extra_body={"top_k": 50}),
        comp_req(long2 + "\nIn summary,", temperature=1.0, top_p=0.8, seed=707, max_tokens=20, logprobs=1),
    ]


REQUESTS = build_requests()


@functools.cache
def serve_args():
    """`--max-batch 16` once the binary has it (before that it serves one request at a time)."""
    out = subprocess.run([str(BINARY), "serve", "--help"], capture_output=True, text=True, timeout=60)
    return ["--max-batch", "16"] if "--max-batch" in out.stdout else []


@pytest.fixture(scope="module")
def cold(start_server):
    """No prompt cache: every request prefills its whole prompt, whatever ran before it. The fast
    path's outputs depend on how much of a prompt came from the cache (its KV is stored in float16,
    and chunk shapes change the kernels' sums), so "run alone" means alone on this server."""
    return start_server("--prompt-cache-gb", "0", *serve_args())


@pytest.fixture(scope="module")
def warm(start_server):
    """The default prompt cache: concurrent rows that start from cached prefixes."""
    return start_server(*serve_args())


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT)


def open_stream(client, srv, req):
    kind, kw = req
    api = client.chat.completions if kind == "chat" else client.completions
    return api.create(model=srv.model, stream=True, stream_options={"include_usage": True}, **kw)


def consume(stream, kind, stop_after=None):
    """One stream read to its end: per choice the text, finish_reason, logprob entries and how many
    chunks carried logprobs; and the usage. With stop_after, it is closed after that many chunks."""
    choices, usage, chunks = {}, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for c in chunk.choices:
            rec = choices.setdefault(c.index, {"text": "", "finish": None, "lp": [], "lp_chunks": 0})
            assert rec["finish"] is None, f"choice {c.index} got a chunk after its finish_reason"
            if kind == "chat":
                rec["text"] += c.delta.content or ""
                if c.logprobs is not None and c.logprobs.content:
                    rec["lp_chunks"] += 1
                    rec["lp"] += [(e.token, tuple(e.bytes or ()), e.logprob,
                                   [(t.token, t.logprob) for t in e.top_logprobs]) for e in c.logprobs.content]
            else:
                rec["text"] += c.text
                if c.logprobs is not None and c.logprobs.tokens:
                    lp = c.logprobs
                    rec["lp_chunks"] += 1
                    rec["lp"] += [(t, (), v, list(top.items())) for t, v, top in
                                  zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True)]
            rec["finish"] = c.finish_reason or rec["finish"]
        if stop_after is not None and chunks >= stop_after:
            stream.close()
            return None
    return {"choices": choices, "usage": usage}


def run_one(client, srv, req):
    return consume(open_stream(client, srv, req), req[0])


def check_well_formed(req, got):
    """Every choice finished; with logprobs, one entry per generated token (none lost or doubled),
    each in a chunk of its own."""
    kw = req[1]
    n = kw.get("n", 1)
    assert sorted(got["choices"]) == list(range(n))
    assert got["usage"] is not None
    for c in got["choices"].values():
        assert c["finish"] in ("stop", "length"), c
    if kw.get("logprobs"):
        total = sum(len(c["lp"]) for c in got["choices"].values())
        assert total == got["usage"][1], (total, got["usage"])
        for c in got["choices"].values():
            assert c["lp_chunks"] == len(c["lp"]) > 0, c
    for c in got["choices"].values():
        if c["finish"] == "length" and n == 1:
            assert got["usage"][1] == kw["max_tokens"], got


def strip_values(result):
    """The result without the logprob values (compared apart, with a tolerance)."""
    return {"usage": result["usage"],
            "choices": {i: {"text": c["text"], "finish": c["finish"], "lp_chunks": c["lp_chunks"],
                            "lp": [(t, b, [tt for tt, _ in top]) for t, b, _, top in c["lp"]]}
                        for i, c in result["choices"].items()}}


def logprob_values(result):
    return [v for i in sorted(result["choices"]) for _, _, lp, top in result["choices"][i]["lp"]
            for v in [lp] + [tv for _, tv in top]]


def assert_same(i, solo, got):
    """Text, finish reason, usage and logprob tokens exactly; logprob values within 1e-4 relative.
    Returns whether the values were bit-identical."""
    where = f"request {i} {REQUESTS[i][0]} {dict((k, v) for k, v in REQUESTS[i][1].items() if k != 'messages')}"
    for c in sorted(set(solo["choices"]) | set(got["choices"])):
        want, have = solo["choices"].get(c, {}), got["choices"].get(c, {})
        assert have.get("text") == want.get("text"), f"{where} choice {c}: text differs from its solo run"
        assert have.get("finish") == want.get("finish"), f"{where} choice {c}: finish_reason differs"
    assert strip_values(got) == strip_values(solo), f"{where}: usage or logprob tokens differ from its solo run"
    a, b = logprob_values(solo), logprob_values(got)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        assert math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6), f"{where}: logprob value {k}: {x} vs {y}"
    return a == b


class PeakLoad:
    """Samples /metrics while a round runs: the most rows running and running + queued at once."""

    def __init__(self, srv):
        self.srv, self.running, self.in_flight = srv, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        deadline = time.monotonic() + 4 * REQUEST_TIMEOUT
        while not self.done.is_set() and time.monotonic() < deadline:
            m = metrics(self.srv)
            running = m.get("mlxcpp_running_rows", 0)
            self.running = max(self.running, running)
            self.in_flight = max(self.in_flight, running + m.get("mlxcpp_queue_depth", 0))
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)


def run_concurrently(jobs):
    """Runs the callables at once (all released by one barrier); returns their results in order."""
    barrier = threading.Barrier(len(jobs), timeout=30)

    def start(job):
        barrier.wait()
        return job()

    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(start, job) for job in jobs]
        deadline = time.monotonic() + 3 * REQUEST_TIMEOUT
        return [f.result(timeout=max(1.0, deadline - time.monotonic())) for f in futures]


def solo_pass(server):
    """Each request run alone, one after the other."""
    client = sdk(server)
    results = []
    for req in REQUESTS:
        got = run_one(client, server, req)
        check_well_formed(req, got)
        results.append(got)
    wait_idle(server, 30)
    return results


@pytest.fixture(scope="module")
def solo_cold(cold):
    results = solo_pass(cold)
    # The set covers what it claims to: a ~1,000-token prompt, stop strings that fired, both finish reasons.
    assert max(r["usage"][0] for r in results) >= 900, [r["usage"] for r in results]
    finishes = {c["finish"] for r in results for c in r["choices"].values()}
    assert finishes == {"stop", "length"}, finishes
    stopped = [i for i, (req, r) in enumerate(zip(REQUESTS, results))
               if req[1].get("stop") and all(c["finish"] == "stop" for c in r["choices"].values())]
    assert len(stopped) >= 3, stopped
    return results


@pytest.fixture(scope="module")
def solo_warm(warm):
    """A first pass puts every prompt in the cache; the second, still one at a time, is the
    reference for a concurrent round in which every prompt is found in the cache."""
    solo_pass(warm)
    before = metrics(warm)
    results = solo_pass(warm)
    assert metrics(warm)["mlxcpp_prompt_cached_tokens_total"] > before["mlxcpp_prompt_cached_tokens_total"]
    return results


def test_solo_runs_are_reproducible(cold, solo_cold):
    """The reference is stable: requests run alone again give the same outputs."""
    client = sdk(cold)
    for i in (2, 7, 15):
        assert_same(i, solo_cold[i], run_one(client, cold, REQUESTS[i]))


def concurrent_round(server, solo):
    """All 16 requests at once; each must equal its solo run. Returns the metrics counters' deltas."""
    client = sdk(server)
    before = metrics(server)
    with PeakLoad(server) as peak:
        got = run_concurrently([lambda r=r: run_one(client, server, r) for r in REQUESTS])
    identical = True
    for i, (req, g) in enumerate(zip(REQUESTS, got)):
        check_well_formed(req, g)
        identical &= assert_same(i, solo[i], g)
    if not identical:
        warnings.warn("concurrent logprob values are within 1e-4 of the solo runs but not bit-identical")
    # The requests really were in flight together (queued, or batched when --max-batch is on).
    assert peak.in_flight >= 2, (peak.in_flight, peak.running)
    if serve_args():
        assert peak.running >= 2, f"--max-batch 16 never ran two rows at once (peak {peak.running})"
    after = wait_idle(server, 30)
    delta = {k: after[k] - before.get(k, 0) for k in after if k.endswith("_total")}
    assert delta["mlxcpp_requests_finished_total"] == len(REQUESTS), delta
    assert delta["mlxcpp_requests_cancelled_total"] == 0, delta
    assert delta["mlxcpp_requests_failed_total"] == 0, delta
    assert delta["mlxcpp_generation_tokens_total"] >= sum(g["usage"][1] for g in got), delta
    return delta


def test_16_concurrent_streams_equal_their_solo_runs(cold, solo_cold):
    delta = concurrent_round(cold, solo_cold)
    assert delta["mlxcpp_prompt_cached_tokens_total"] == 0, delta


def test_16_concurrent_streams_from_cached_prompts_equal_their_solo_runs(warm, solo_warm):
    delta = concurrent_round(warm, solo_warm)
    assert delta["mlxcpp_prompt_cached_tokens_total"] > 0, delta


def test_clients_hanging_up_do_not_disturb_the_others(cold, solo_cold):
    client = sdk(cold)
    keep = [0, 5, 8, 13]  # greedy, long prompt + logprobs, sampled + top_k, completions + logprobs + stop
    hang_up = [chat_req(f"Tell me a very long story about a knight named {name}.", max_tokens=256, **kw)
               for name, kw in [("Arthur", dict(temperature=0)), ("Bors", dict(temperature=0.8, seed=11)),
                                ("Cai", dict(temperature=0, logprobs=True, top_logprobs=2)),
                                ("Dagonet", dict(temperature=0.9, seed=12, n=2))]]
    before = metrics(cold)
    jobs = []
    for i, h in zip(keep, hang_up):
        jobs.append(lambda i=i: run_one(client, cold, REQUESTS[i]))
        jobs.append(lambda h=h: consume(open_stream(client, cold, h), "chat", stop_after=4))
    got = run_concurrently(jobs)
    for k, i in enumerate(keep):
        check_well_formed(REQUESTS[i], got[2 * k])
        assert_same(i, solo_cold[i], got[2 * k])
    after = wait_idle(cold, 30)
    cancelled = after["mlxcpp_requests_cancelled_total"] - before["mlxcpp_requests_cancelled_total"]
    finished = after["mlxcpp_requests_finished_total"] - before["mlxcpp_requests_finished_total"]
    assert (cancelled, finished) == (len(hang_up), len(keep))
    assert cold.alive()


def test_quantized_kv_cache_requests_batch(start_server):
    """`serve --kv-bits 8`: every row's KV cache held quantized from its first token, in batches
    (BatchQuantizedKVCache: mlx-lm's server cannot): concurrent greedy requests equal each alone,
    a second turn resumes from the quantized prompt cache, and the cache holds fewer bytes."""
    q = start_server("--kv-bits", "8", "--kv-group-size", "64", *serve_args())
    plain = start_server(*serve_args())
    client = sdk(q)
    asks = [f"Write two sentences about {w}." for w in ("rivers", "copper", "falcons", "lanterns")]
    alone = [client.chat.completions.create(model=q.model, messages=[{"role": "user", "content": a}], temperature=0,
                                            max_tokens=24).choices[0].message.content for a in asks]
    wait_idle(q, 30)
    got = run_concurrently([lambda a=a: client.chat.completions.create(
        model=q.model, messages=[{"role": "user", "content": a}], temperature=0,
        max_tokens=24).choices[0].message.content for a in asks])
    assert got == alone
    first = [{"role": "user", "content": "My name is Ada. Remember it."}]
    r1 = client.chat.completions.create(model=q.model, messages=first, temperature=0, max_tokens=12)
    turn2 = first + [{"role": "assistant", "content": r1.choices[0].message.content},
                     {"role": "user", "content": "What is my name?"}]
    r2 = client.chat.completions.create(model=q.model, messages=turn2, temperature=0, max_tokens=12)
    assert r2.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens - 1
    # The same requests on a float server: the quantized prompt cache is smaller.
    pc = sdk(plain)
    for a in asks + ["My name is Ada. Remember it."]:
        pc.chat.completions.create(model=plain.model, messages=[{"role": "user", "content": a}], temperature=0,
                                   max_tokens=24)
    for a in asks:
        client.chat.completions.create(model=q.model, messages=[{"role": "user", "content": a}], temperature=0,
                                       max_tokens=24)
    assert 0 < metrics(q)["mlxcpp_prompt_cache_bytes"] < metrics(plain)["mlxcpp_prompt_cache_bytes"]
    assert q.alive()
