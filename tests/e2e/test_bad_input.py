"""A corpus of malformed requests against the real server: each gets its expected status and an
error in its protocol's shape (OpenAI {"error": {...}}, Anthropic {"type": "error", ...}), and
the server stays up and still answers a real generation afterwards."""
import http.client
import json
import socket
import time

import pytest

KEY = "test-key-123"
MAX_BODY = 65536


@pytest.fixture(scope="module")
def srv(start_server):
    return start_server("--api-key", KEY, "--max-body-bytes", str(MAX_BODY), "--header-timeout", "1",
                        "--max-tokens", "4")


def request(srv, method, path, body=b"", headers=None, key=KEY, timeout=60):
    host, port = srv.url[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def assert_alive(srv):
    status, data = request(srv, "GET", "/health")
    assert status == 200 and json.loads(data) == {"status": "ok"}


def check_shape(path, data):
    j = json.loads(data)
    if path.startswith("/v1/messages"):
        assert j["type"] == "error" and isinstance(j["error"]["message"], str) and j["error"]["type"], j
    else:
        assert isinstance(j["error"]["message"], str) and j["error"]["message"], j
    return j


MSGS = [{"role": "user", "content": "hi"}]
CHAT = {"messages": MSGS, "max_tokens": 2}
ANTH = {"model": "x", "max_tokens": 2, "messages": MSGS}


def chat_cases():
    bad_values = {
        "temperature": ["hot", -1, 101, [], {}, True],
        "top_p": [2, -0.1, "x", [0.5]],
        "top_k": [-5, 1.5, "x", {}],
        "min_p": [2, -1, "x"],
        "presence_penalty": [5, -3, "x"],
        "frequency_penalty": [-3, 3, "y"],
        "repetition_penalty": [0, -1, 11, "z"],
        "logit_bias": [[], "x", {"abc": 1}, {"1": 1000}, {"99999999": 1}, {"-1": 1}, {"1": "x"}],
        "seed": ["x", 1.5, []],
        "stop": [5, [1], [""], ["a"] * 20, {}],
        "n": [0, 100, "2", -1],
        "max_tokens": [-1, "10", 1.5, 2 ** 40],
        "max_completion_tokens": [-3, "x"],
        "messages": ["hi", [1], [], [{"role": "wizard", "content": "x"}], [{"role": "user"}],
                     [{"role": "user", "content": 5}], [{"role": "user", "content": [{"type": "image_url"}]}],
                     [{"role": "user", "content": [{"text": "no type"}]}], [{"content": "no role"}],
                     [{"role": 5, "content": "x"}], [{"role": "assistant", "tool_calls": "x"}],
                     [{"role": "assistant", "tool_calls": [{"function": {}}]}], None],
        "tools": ["x", [{"type": "function"}], [{"type": "function", "function": {}}], [{"type": "web"}], [5]],
        "tool_choice": ["always", 5, {"function": {"name": "nope"}}, "required"],
        "stream": ["yes", 1],
        "stream_options": [1, "x"],
        "logprobs": ["yes"],
        "top_logprobs": [50, -1],
        "response_format": ["json", {"type": 5}, {"type": "xml"}, {"type": "json_schema"},
                            {"type": "json_schema", "json_schema": {"schema": "x"}},
                            {"type": "json_schema", "json_schema": {"schema": {"type": "strnig"}}}],
        "chat_template_kwargs": ["x", [1]],
        "reasoning_effort": ["extreme", 5],
        "model": [5, []],
    }
    for field, values in bad_values.items():
        for v in values:
            body = dict(CHAT)
            if v is None:
                body.pop(field, None)
            else:
                body[field] = v
            yield f"chat.{field}={json.dumps(v)[:30]}", "POST", "/v1/chat/completions", body, 400
    yield "chat.top_logprobs-without-logprobs", "POST", "/v1/chat/completions", dict(CHAT, top_logprobs=2), 400


def completion_cases():
    base = {"prompt": "hi", "max_tokens": 2}
    for field, values in {
        "prompt": [5, [], [-1], ["a", ""], [[1], []], ["a"] * 17, [1.5], {"x": 1}, "", [99999999], [["a"]]],
        "echo": ["x"], "logprobs": [99, "x", -1], "suffix": ["x"], "best_of": [3], "max_tokens": [-1],
        "temperature": [-2], "stop": [[""]],
    }.items():
        for v in values:
            yield f"completions.{field}={json.dumps(v)[:30]}", "POST", "/v1/completions", dict(base, **{field: v}), 400
    yield "completions.no-prompt", "POST", "/v1/completions", {"max_tokens": 2}, 400


def anthropic_cases():
    for field, values in {
        "max_tokens": [None, -1, 0, "x"],
        "messages": [None, [], "hi", [{"role": "user"}], [{"role": "robot", "content": "x"}],
                     [{"role": "user", "content": [{"type": "image", "source": {}}]}],
                     [{"role": "user", "content": [{"type": "bogus"}]}], [{"role": "user", "content": 5}]],
        "system": [5, [{"type": "image"}]],
        "stop_sequences": ["x", [5], [""]],
        "temperature": [-1, "x"],
        "tools": ["x", [{"description": "no name"}], [5]],
        "tool_choice": ["auto", {"type": "tool"}, {"type": "weird"}],
        "thinking": ["on", {"type": "sometimes"}],
        "stream": ["yes"],
    }.items():
        for v in values:
            body = dict(ANTH)
            if v is None:
                body.pop(field, None)
            else:
                body[field] = v
            yield f"messages.{field}={json.dumps(v)[:30]}", "POST", "/v1/messages", body, 400
    yield "count_tokens.no-messages", "POST", "/v1/messages/count_tokens", {"model": "x"}, 400


def responses_cases():
    for field, values in {
        "input": [None, 5, [], [{"type": "function_call"}], [{"type": "bogus"}], [{"role": "user", "content": 5}],
                  [{"role": "user", "content": [{"type": "input_image"}]}]],
        "tools": ["x", [{"type": "web_search"}], [{"type": "function"}]],
        "tool_choice": ["sometimes", {"type": "function"}],
        "max_output_tokens": [-1, "x"],
        "temperature": [5000],
        "text": [{"format": {"type": "json_schema"}}],
        "previous_response_id": [5],
    }.items():
        for v in values:
            body = {"input": "hi", "max_output_tokens": 2}
            if v is None:
                body.pop(field, None)
            else:
                body[field] = v
            yield f"responses.{field}={json.dumps(v)[:30]}", "POST", "/v1/responses", body, 400
    yield "responses.unknown-previous", "POST", "/v1/responses", {"input": "hi", "previous_response_id": "resp_nope"}, 404


def raw_body_cases():
    for path in ["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/tokenize",
                 "/detokenize", "/v1/messages/count_tokens"]:
        for i, body in enumerate([b"", b"{", b"[]", b"null", b"123", b'{"a":', b"\xff\xfe", b'"str"',
                                  b'{"messages": "\xff"}', b"[" * 10000, b'{"a":' * 1000 + b"1" + b"}" * 1000,
                                  b"\x00\x01\x02"]):
            yield f"raw{path}#{i}", "POST", path, body, 400


def misc_cases():
    yield "unknown-endpoint", "GET", "/v1/nothing", b"", 404
    yield "unknown-endpoint-post", "POST", "/v2/chat/completions", CHAT, 404
    yield "wrong-method", "GET", "/v1/chat/completions", b"", 405
    yield "wrong-method-models", "POST", "/v1/models", b"{}", 405
    yield "unknown-model", "POST", "/v1/chat/completions", dict(CHAT, model="gpt-none"), 404
    yield "over-context", "POST", "/v1/chat/completions", dict(CHAT, max_tokens=10_000_000), 413
    yield "oversized-body", "POST", "/v1/chat/completions", b'{"messages": "' + b"x" * (MAX_BODY + 10) + b'"}', 413
    yield "oversized-body-anthropic", "POST", "/v1/messages", b'{"messages": "' + b"x" * (MAX_BODY + 10) + b'"}', 413
    yield "detok-bad-ids", "POST", "/detokenize", {"tokens": [-1]}, 400
    yield "detok-huge-id", "POST", "/detokenize", {"tokens": [10 ** 9]}, 400
    yield "tokenize-no-content", "POST", "/tokenize", {}, 400
    # Assistant prefill: Anthropic's rule on trailing whitespace, a final tool_use, vLLM's fields.
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello "}]
    yield "anthropic-prefill-trailing-space", "POST", "/v1/messages", \
        {"model": "m", "max_tokens": 4, "messages": prefill}, 400
    tool_use = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]
    yield "anthropic-prefill-tool-use", "POST", "/v1/messages", {"model": "m", "max_tokens": 4, "messages": tool_use}, 400
    yield "chat-continue-no-assistant", "POST", "/v1/chat/completions", dict(CHAT, continue_final_message=True), 400
    yield "chat-continue-and-agp", "POST", "/v1/chat/completions", \
        dict(CHAT, messages=prefill, continue_final_message=True, add_generation_prompt=True), 400
    yield "chat-continue-not-bool", "POST", "/v1/chat/completions", dict(CHAT, continue_final_message="yes"), 400


CASES = list(chat_cases()) + list(completion_cases()) + list(anthropic_cases()) + list(responses_cases()) + \
    list(raw_body_cases()) + list(misc_cases())


def test_corpus_is_large():
    assert len(CASES) >= 200, len(CASES)


def test_corpus(srv):
    failures = []
    for i, (name, method, path, body, want) in enumerate(CASES):
        try:
            status, data = request(srv, method, path, body)
        except Exception as e:  # noqa: BLE001 - recorded with the case's name
            failures.append(f"{name}: {e!r}")
            continue
        if status != want:
            failures.append(f"{name}: status {status}, want {want}: {data[:200]!r}")
        else:
            try:
                check_shape(path, data)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: bad error shape {data[:200]!r} ({e!r})")
        assert srv.alive(), f"server died on {name}: {srv.stderr_text()[-2000:]}"
        if i % 25 == 0:
            assert_alive(srv)
    assert not failures, "\n".join(failures)
    # A real generation still works afterwards.
    status, data = request(srv, "POST", "/v1/chat/completions", CHAT)
    assert status == 200, data
    assert json.loads(data)["choices"][0]["message"]["role"] == "assistant"


def test_auth(srv):
    for key, headers, want in [(None, {}, 401), ("wrong", {}, 401), (None, {"x-api-key": KEY}, 200),
                               (None, {"x-api-key": "nope"}, 401), (KEY, {}, 200)]:
        status, data = request(srv, "POST", "/v1/chat/completions", CHAT, headers=headers, key=key)
        assert status == want, (key, headers, data)
        if want == 401:
            check_shape("/v1/chat/completions", data)
    status, data = request(srv, "POST", "/v1/messages", ANTH, key=None)
    assert status == 401
    check_shape("/v1/messages", data)
    status, _ = request(srv, "GET", "/health", key=None)
    assert status == 200


def test_slowloris_headers_are_cut_off(srv):
    host, port = srv.url[len("http://"):].split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pytest.fail("the server kept a connection with incomplete headers open for 10 s")
    finally:
        s.close()
    assert time.monotonic() - t0 < 8
    assert data == b"" or data.startswith(b"HTTP/1.1 408")
    assert_alive(srv)
