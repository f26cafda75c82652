"""KV-cache quantization per request (kv_bits, kv_group_size, quantized_kv_start in the body of any
endpoint; the server's --kv-bits / --kv-group-size / --quantized-kv-start are their defaults): each
kind of cache is its own batch, so quantized and float requests run side by side and each answers
as it does alone; the prompt cache keeps the kinds apart; bad values are 400s naming the field."""
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai
import pytest

from conftest import wait_idle

ASKS = [f"Write two sentences about {w}." for w in ("rivers", "copper", "falcons", "lanterns")]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def ask(server, content, **extra):
    """A greedy answer: its text and every token's logprob (8-bit caches rarely change greedy text)."""
    r = client(server).chat.completions.create(model=server.model, messages=[{"role": "user", "content": content}],
                                               temperature=0, max_tokens=24, logprobs=True, extra_body=extra or None)
    c = r.choices[0]
    return c.message.content, tuple(t.logprob for t in c.logprobs.content)


@pytest.fixture(scope="module")
def servers(start_server):
    """A float server and a --kv-bits 8 one, neither with a prompt cache (answers then depend only
    on the request: the fast path's sums follow how much of a prompt came from a cache)."""
    plain = start_server("--prompt-cache-gb", "0", "--max-batch", "16")
    quant = start_server("--prompt-cache-gb", "0", "--max-batch", "16", "--kv-bits", "8")
    return plain, quant


@pytest.fixture(scope="module")
def answers(servers):
    """Each ask alone: float (the plain server) and 8-bit (the --kv-bits 8 server)."""
    plain, quant = servers
    return [ask(plain, a) for a in ASKS], [ask(quant, a) for a in ASKS]


def test_kv_bits_in_the_request_equals_the_servers_flag(servers, answers):
    plain, quant = servers
    floats, quants = answers
    assert floats != quants, "8-bit caches should change some logprob of these four answers"
    assert [ask(plain, a, kv_bits=8) for a in ASKS] == quants
    assert [ask(quant, a, kv_bits=0) for a in ASKS] == floats  # 0: a float cache on a quantized server
    # quantized_kv_start: only prompts holding at least that many tokens are quantized.
    assert [ask(plain, a, kv_bits=8, quantized_kv_start=100000) for a in ASKS] == floats
    assert [ask(plain, a, kv_bits=8, quantized_kv_start=1) for a in ASKS] == quants


def test_quantized_and_float_requests_run_side_by_side(servers, answers):
    plain, _ = servers
    floats, quants = answers
    jobs = [(a, {}) for a in ASKS] + [(a, {"kv_bits": 8}) for a in ASKS]
    wait_idle(plain)
    with ThreadPoolExecutor(len(jobs)) as pool:
        got = list(pool.map(lambda j: ask(plain, j[0], **j[1]), jobs))
    assert got[:len(ASKS)] == floats
    assert got[len(ASKS):] == quants
    assert plain.alive()


def test_prompt_cache_keeps_the_kinds_apart(start_server, answers):
    """With a prompt cache: an 8-bit request stores its quantized rows; the same prompt asked with a
    float cache must not start from them (and answers as a float request does)."""
    floats, quants = answers
    warm = start_server("--max-batch", "16")
    c = client(warm)
    for a, want in zip(ASKS[:2], quants[:2]):
        assert ask(warm, a, kv_bits=8)[0] == want[0]
    r = c.chat.completions.create(model=warm.model, messages=[{"role": "user", "content": ASKS[0]}], temperature=0,
                                  max_tokens=24)
    assert r.usage.prompt_tokens_details.cached_tokens == 0  # the quantized entries are not this kind
    assert r.choices[0].message.content == floats[0][0]
    again = c.chat.completions.create(model=warm.model, messages=[{"role": "user", "content": ASKS[0]}],
                                      temperature=0, max_tokens=24, extra_body={"kv_bits": 8})
    assert again.usage.prompt_tokens_details.cached_tokens > 0  # its own kind's entry


@pytest.mark.parametrize("field,value,says", [
    ("kv_bits", 3, "kv_bits"),
    ("kv_bits", "8", "kv_bits"),
    ("kv_group_size", 48, "kv_group_size"),
    ("kv_group_size", 128, "does not divide"),  # SmolLM2's heads are 64 wide
    ("quantized_kv_start", -1, "quantized_kv_start"),
])
def test_bad_kv_fields_are_400s(servers, field, value, says):
    plain, _ = servers
    extra = {field: value}
    if field != "kv_bits":
        extra["kv_bits"] = 8
    with pytest.raises(openai.BadRequestError) as e:
        ask(plain, "Hi", **extra)
    assert says in str(e.value)
    assert ask(plain, ASKS[0])[0]  # the server answers on
    assert plain.alive()


def test_anthropic_messages_take_kv_bits(servers):
    plain, _ = servers
    a = anthropic.Anthropic(base_url=plain.url, api_key="unused", max_retries=0, timeout=300)
    kw = dict(model=plain.model, max_tokens=24, messages=[{"role": "user", "content": ASKS[0]}])
    r4 = a.messages.create(**kw, extra_body={"kv_bits": 4, "temperature": 0})
    r0 = a.messages.create(**kw, extra_body={"kv_bits": 0, "temperature": 0})
    default = a.messages.create(**kw, extra_body={"temperature": 0})
    assert r0.content[0].text == default.content[0].text  # the plain server's caches are float
    assert r4.content[0].text != r0.content[0].text  # 4-bit keys change this answer
