"""Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) through the official
`anthropic` SDK against the real `mlxcpp serve` on SmolLM2-135M-Instruct."""
import json
import urllib.request

import anthropic
import openai
import pytest
import transformers

from conftest import MODEL_DIR, generate_cli

PROMPT = "What is the capital of France? Answer in one sentence."
SYSTEM = "You are a pirate. Answer like one."


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def user(content):
    return [{"role": "user", "content": content}]


# This SDK no longer takes sampling parameters as arguments; the server still reads them.
GREEDY = {"temperature": 0}


def message(client, server, messages, **kw):
    kw.setdefault("extra_body", GREEDY)
    kw.setdefault("max_tokens", 24)
    kw.setdefault("model", server.model)
    return client.messages.create(messages=messages, **kw)


def text_of(msg):
    assert [b.type for b in msg.content] == ["text"], msg.content
    return msg.content[0].text


def reference(prompt, *args):
    out = generate_cli("--prompt", prompt, *args)
    assert out.endswith("\n")
    return out[:-1]


def count(client, server, messages, **kw):
    return client.messages.count_tokens(model=server.model, messages=messages, **kw).input_tokens


def test_greedy_message_equals_generate_and_openai(client, server):
    msg = message(client, server, user(PROMPT), model="claude-sonnet-4-5")
    expected = reference(PROMPT, "--max-tokens", "24")
    assert text_of(msg) == expected
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.id.startswith("msg_")
    assert msg.model == server.model  # the server's one model, whatever the request named
    assert msg.stop_reason in ("end_turn", "max_tokens")
    assert msg.stop_sequence is None
    assert msg.usage.output_tokens > 0
    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    chat = oa.chat.completions.create(model=server.model, messages=user(PROMPT), temperature=0, max_tokens=24)
    assert chat.choices[0].message.content == expected
    assert msg.usage.output_tokens == chat.usage.completion_tokens


PREFILL = [{"role": "user", "content": "Name three fruits, separated by commas."},
           {"role": "assistant", "content": "Apple, banana,"}]


def post_json(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_assistant_prefill_continues_the_message(client, server):
    # The oracle's prompt: transformers' apply_chat_template(continue_final_message=True).
    tok = transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR))
    text = tok.apply_chat_template(PREFILL, continue_final_message=True, tokenize=False)
    assert text.endswith("Apple, banana,")
    ids = tok.encode(text, add_special_tokens=False)
    assert post_json(server, "/tokenize", {"messages": PREFILL, "continue_final_message": True})["tokens"] == ids
    assert count(client, server, PREFILL) == len(ids)
    msg = message(client, server, PREFILL, max_tokens=12)
    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    raw = oa.completions.create(model=server.model, prompt=ids, max_tokens=12, temperature=0)
    assert text_of(msg) == raw.choices[0].text and text_of(msg)
    assert msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0) == len(ids)  # cached: not input
    # vLLM's continue_final_message on the OpenAI chat endpoint: the same continuation.
    chat = oa.chat.completions.create(model=server.model, messages=PREFILL, max_tokens=12, temperature=0,
                                      extra_body={"continue_final_message": True})
    assert chat.choices[0].message.content == text_of(msg)
    # An empty final assistant message is no prefill: a new turn, as without it.
    empty = message(client, server, PREFILL[:1] + [{"role": "assistant", "content": ""}], max_tokens=12)
    assert text_of(empty) == text_of(message(client, server, PREFILL[:1], max_tokens=12))


def test_max_tokens_stop_reason(client, server):
    msg = message(client, server, user(PROMPT), max_tokens=3)
    assert msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 3


def test_stream_equals_whole(client, server):
    whole = message(client, server, user("Name three colors."), max_tokens=20)
    pieces = []
    with client.messages.stream(model=server.model, messages=user("Name three colors."), max_tokens=20,
                                extra_body=GREEDY) as s:
        for t in s.text_stream:
            pieces.append(t)
        final = s.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == text_of(whole)
    assert text_of(final) == text_of(whole)
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    assert final.model == server.model and final.id.startswith("msg_")


def test_stream_event_sequence(client, server):
    events = list(message(client, server, user(PROMPT), max_tokens=5, stream=True))
    types = [e.type for e in events]
    assert types[0] == "message_start"
    assert types[1] == "content_block_start"
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(types[2:-3]) == {"content_block_delta"}
    assert events[0].message.content == [] and events[0].message.usage.input_tokens > 0
    assert all(e.index == 0 for e in events[1:-2])
    assert events[-2].delta.stop_reason == "max_tokens"
    assert events[-2].usage.output_tokens == 5


def test_stop_sequences(client, server):
    full = text_of(message(client, server, user(PROMPT), max_tokens=30))
    words = full.split(" ")
    assert len(words) > 3, full
    stop = words[2][:3] or words[3]  # a piece from the middle of the answer
    msg = message(client, server, user(PROMPT), max_tokens=30, stop_sequences=[stop, "never-seen-xyz"])
    text = text_of(msg)
    assert msg.stop_reason == "stop_sequence"
    assert msg.stop_sequence == stop
    assert stop not in text
    assert text == full[:full.index(stop)]
    with client.messages.stream(model=server.model, messages=user(PROMPT), max_tokens=30, extra_body=GREEDY,
                                stop_sequences=[stop]) as s:
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop
    assert text_of(final) == text


def test_usage_matches_count_tokens(client, server):
    messages = user("Count my tokens, please: one two three.")
    n = count(client, server, messages)
    assert n > 0
    for _ in range(2):  # the second run reads the prompt cache; the sum stays the same
        msg = message(client, server, messages, max_tokens=4)
        assert msg.usage.input_tokens + msg.usage.cache_read_input_tokens == n
        assert msg.usage.cache_creation_input_tokens == 0
        assert msg.usage.input_tokens >= 1
    assert msg.usage.cache_read_input_tokens > 0


def test_second_turn_reads_the_cache(client, server):
    first = user("Tell me one fact about the moon. (turn test 7f3a)")
    reply = message(client, server, first, max_tokens=16)
    second = first + [{"role": "assistant", "content": text_of(reply)},
                      {"role": "user", "content": "And one about the sun?"}]
    msg = message(client, server, second, max_tokens=16)
    assert msg.usage.cache_read_input_tokens > 0
    assert msg.usage.input_tokens + msg.usage.cache_read_input_tokens == count(client, server, second)
    assert msg.usage.cache_read_input_tokens >= count(client, server, first) // 2


def test_system_prompt(client, server):
    expected = reference(PROMPT, "--system-prompt", SYSTEM, "--max-tokens", "24")
    assert text_of(message(client, server, user(PROMPT), system=SYSTEM)) == expected
    blocks = [{"type": "text", "text": SYSTEM}]
    assert text_of(message(client, server, user(PROMPT), system=blocks)) == expected
    assert count(client, server, user(PROMPT), system=SYSTEM) == count(client, server, user(PROMPT), system=blocks)


def test_count_tokens_equals_the_openai_prompt(client, server):
    messages = [{"role": "user", "content": "Hi there."},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello! How can I help?"}]},
                {"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    n = count(client, server, messages, system=SYSTEM)
    oa = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    oa_messages = [{"role": "system", "content": SYSTEM}] + [
        {"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]}
        for m in messages]
    chat = oa.chat.completions.create(model=server.model, messages=oa_messages, max_tokens=1)
    assert n == chat.usage.prompt_tokens
    assert n > count(client, server, user(PROMPT))


def test_tool_history_renders(client, server):
    tools = [{"name": "get_weather", "description": "Weather by city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "20C and sunny"}]}]
    msg = message(client, server, messages, tools=tools, max_tokens=8)
    assert msg.usage.input_tokens + msg.usage.cache_read_input_tokens == count(client, server, messages, tools=tools)
    assert msg.stop_reason in ("end_turn", "max_tokens")


def error_of(exc):
    body = exc.value.body
    assert body["type"] == "error", body
    return body["error"]


def test_errors_are_anthropic_shaped(client, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.post("/v1/messages", cast_to=object,
                    body={"model": server.model, "messages": user("hi")})
    assert e.value.status_code == 400
    assert error_of(e)["type"] == "invalid_request_error"
    assert "max_tokens" in error_of(e)["message"]

    with pytest.raises(anthropic.BadRequestError) as e:
        message(client, server, user([{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                   "data": "iVBORw0KGgo="}}]))
    assert "messages[0].content[0].type" in error_of(e)["message"]
    assert "not supported" in error_of(e)["message"]

    with pytest.raises(anthropic.BadRequestError) as e:
        message(client, server, user(PROMPT), extra_body={"temperature": 5})
    assert "temperature" in error_of(e)["message"]

    with pytest.raises(anthropic.BadRequestError) as e:
        message(client, server, [{"role": "system", "content": "x"}])
    assert "messages[0].role" in error_of(e)["message"]

    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.count_tokens(model=server.model, messages=[])
    assert "messages" in error_of(e)["message"]

    with pytest.raises(anthropic.APIStatusError) as e:
        message(client, server, user(PROMPT), max_tokens=10_000_000)
    assert e.value.status_code == 413
    assert error_of(e)["type"] == "request_too_large"

    with pytest.raises(anthropic.APIStatusError) as e:  # the stream is refused before it starts
        with client.messages.stream(model=server.model, messages=user(PROMPT), max_tokens=10_000_000) as s:
            s.get_final_message()
    assert e.value.status_code == 413


def test_api_key(start_server):
    s = start_server("--api-key", "sekret-key")
    bad = anthropic.Anthropic(base_url=s.url, api_key="wrong", max_retries=0, timeout=60)
    with pytest.raises(anthropic.AuthenticationError) as e:
        bad.messages.create(model=s.model, max_tokens=4, messages=user("hi"))
    assert e.value.status_code == 401
    assert error_of(e)["type"] == "authentication_error"
    good = anthropic.Anthropic(base_url=s.url, api_key="sekret-key", max_retries=0, timeout=60)  # x-api-key
    msg = good.messages.create(model=s.model, max_tokens=4, extra_body=GREEDY, messages=user("hi"))
    assert msg.usage.output_tokens > 0
    assert good.messages.count_tokens(model=s.model, messages=user("hi")).input_tokens > 0
