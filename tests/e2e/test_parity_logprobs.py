"""Logprobs in parity mode are the oracle's: `mlxcpp serve --parity` against mlx-lm's own
generate_step (float32, greedy) on the same prompt ids — every chosen token's log-probability and
the top-3 alternatives equal bit for bit."""
import json
import urllib.request

import openai
import pytest

from conftest import MODEL_DIR

MESSAGES = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
STEPS = 6


def oracle(ids):
    mx = pytest.importorskip("mlx.core")
    from mlx_lm.generate import generate_step
    from mlx_lm.utils import load_model
    model, _ = load_model(MODEL_DIR)
    model.set_dtype(mx.float32)
    out = []
    for (tok, lp), _ in zip(generate_step(mx.array(ids, dtype=mx.int32), model, max_tokens=STEPS), range(STEPS)):
        tok = int(tok)
        order = mx.argsort(-lp)[:3]
        out.append((lp[tok].item(), [lp[int(i)].item() for i in order.tolist()]))
    return out


def test_logprobs_equal_mlx_lm(start_server):
    server = start_server("--parity")
    req = urllib.request.Request(server.url + "/tokenize", data=json.dumps({"messages": MESSAGES}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        ids = json.loads(r.read())["tokens"]
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    resp = client.chat.completions.create(model=server.model, messages=MESSAGES, temperature=0, max_tokens=STEPS,
                                          logprobs=True, top_logprobs=3)
    got = [(e.logprob, [t.logprob for t in e.top_logprobs]) for e in resp.choices[0].logprobs.content]
    want = oracle(ids)
    assert len(got) == resp.usage.completion_tokens
    assert got == want[: len(got)]
