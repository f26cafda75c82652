"""OpenAI endpoints (chat/completions, completions, models, tokenize) through the official
`openai` SDK against the real `mlxcpp serve` on SmolLM2-135M-Instruct."""
import json
import math
import urllib.request

import openai
import pytest

from conftest import generate_cli

PROMPT = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def chat(client, server, content, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 24)
    return client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": content}], **kw)


def post_json(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def reference(prompt, *args):
    out = generate_cli("--prompt", prompt, *args)
    assert out.endswith("\n")
    return out[:-1]


def test_models_and_health(client, server):
    models = client.models.list()
    assert [m.id for m in models.data] == [server.model]
    with urllib.request.urlopen(server.url + "/health", timeout=10) as r:
        assert json.loads(r.read()) == {"status": "ok"}


def test_greedy_chat_equals_generate(client, server):
    r = chat(client, server, PROMPT)
    expected = reference(PROMPT, "--max-tokens", "24")
    assert r.choices[0].message.content == expected
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_equals_whole(client, server):
    whole = chat(client, server, "Name three colors.", max_tokens=20)
    stream = chat(client, server, "Name three colors.", max_tokens=20, stream=True,
                  stream_options={"include_usage": True})
    text, finish, usage, roles = "", None, None, 0
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.role:
                roles += 1
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert roles == 1
    assert text == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_stop_string_never_leaks(client, server):
    full = chat(client, server, PROMPT, max_tokens=30).choices[0].message.content
    words = full.split(" ")
    assert len(words) > 3, full
    stop = words[2][:3] or words[3]  # a piece from the middle of the answer
    cut = full.index(stop)
    r = chat(client, server, PROMPT, max_tokens=30, stop=[stop, "zzzz-never"])
    assert r.choices[0].message.content == full[:cut]
    assert r.choices[0].finish_reason == "stop"
    s = chat(client, server, PROMPT, max_tokens=30, stop=stop, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in s if c.choices) == full[:cut]


def test_n_with_seed_is_reproducible_and_equals_solo_runs(client, server):
    prompt = "Write a word that rhymes with cat."
    kw = dict(temperature=1.0, max_tokens=12, n=3, seed=1234)
    a = chat(client, server, prompt, **kw)
    b = chat(client, server, prompt, **kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    # Choice i is seeded with seed + i, like `mlxcpp generate --seed` run alone.
    assert a.choices[0].message.content == reference(prompt, "--max-tokens", "12", "--temp", "1.0", "--seed", "1234")


def test_logprobs_shape_and_greedy_top(client, server):
    r = chat(client, server, PROMPT, max_tokens=8, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 3
        tops = [t.logprob for t in entry.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert entry.top_logprobs[0].token == entry.token
        assert entry.logprob == entry.top_logprobs[0].logprob
        assert entry.logprob <= 0 and sum(math.exp(t) for t in tops) <= 1.0 + 1e-5
        assert bytes(entry.bytes) == entry.token.encode()
    plain = chat(client, server, PROMPT, max_tokens=8)
    assert r.choices[0].message.content == plain.choices[0].message.content


def test_second_turn_reuses_the_prompt_cache(client, server):
    first = [{"role": "user", "content": "My name is Ada. Remember it."}]
    r1 = client.chat.completions.create(model=server.model, messages=first, temperature=0, max_tokens=16)
    turn2 = first + [{"role": "assistant", "content": r1.choices[0].message.content},
                     {"role": "user", "content": "What is my name?"}]
    r2 = client.chat.completions.create(model=server.model, messages=turn2, temperature=0, max_tokens=16)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    assert cached >= r1.usage.prompt_tokens - 1, (cached, r1.usage)
    assert cached < r2.usage.prompt_tokens


def test_completions_text_echo_ids_and_logprobs(client, server):
    r = client.completions.create(model=server.model, prompt="The capital of France is", max_tokens=8, temperature=0)
    text = r.choices[0].text
    assert text == reference("The capital of France is", "--raw", "--max-tokens", "8")
    ids = post_json(server, "/tokenize", {"content": "The capital of France is"})["tokens"]
    r2 = client.completions.create(model=server.model, prompt=ids, max_tokens=8, temperature=0, echo=True, logprobs=2)
    assert r2.choices[0].text == "The capital of France is" + text
    lp = r2.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r2.usage.completion_tokens
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    chunks = client.completions.create(model=server.model, prompt="The capital of France is", max_tokens=8,
                                       temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == text


def test_completions_with_a_list_of_prompts(client, server):
    prompts = ["The capital of France is", "One plus one is"]
    solo = [client.completions.create(model=server.model, prompt=p, max_tokens=6, temperature=0).choices[0].text
            for p in prompts]
    r = client.completions.create(model=server.model, prompt=prompts, max_tokens=6, temperature=0, echo=True)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.text for c in r.choices] == [p + t for p, t in zip(prompts, solo)]
    # n choices per prompt, numbered prompt by prompt; the stream carries the same texts.
    r2 = client.completions.create(model=server.model, prompt=prompts, max_tokens=6, temperature=0, n=2)
    assert [c.text for c in r2.choices] == [solo[0], solo[0], solo[1], solo[1]]
    texts = {}
    for chunk in client.completions.create(model=server.model, prompt=prompts, max_tokens=6, temperature=0,
                                           stream=True, stream_options={"include_usage": True}):
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
        if chunk.usage:
            assert chunk.usage.completion_tokens == r.usage.completion_tokens
    assert [texts[0], texts[1]] == solo


def test_tokenize_detokenize_round_trip(client, server):
    t = post_json(server, "/tokenize", {"content": "Hello world", "add_special_tokens": False})
    assert t["count"] == len(t["tokens"]) > 0
    d = post_json(server, "/detokenize", {"tokens": t["tokens"]})
    assert d["content"] == "Hello world"


def test_errors_are_openai_shaped(client, server):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=[], max_tokens=4)
    assert e.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": "x"}], temperature=-1)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": "x"}],
                                       max_tokens=10_000_000)
    assert e.value.status_code == 413


def test_metrics_after_requests(client, server):
    chat(client, server, "Hi", max_tokens=2)
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    assert 'mlxcpp_http_requests_total{endpoint="chat_completions",status="200"}' in text
    assert "\nmlxcpp_running_rows 0\n" in text
    assert "mlxcpp_time_to_first_token_seconds_count" in text
    assert "mlxcpp_prompt_cache_bytes" in text
