"""POST /v1/embeddings through the official openai SDK against the real `mlxcpp serve` on a tiny
qwen3 carrying the real Qwen3 tokenizer with Qwen3-Embedding's post-processor (built, with
mlx-lm's pooled vectors, by tools/oracle/embedding_goldens.py). The SDK asks for base64 unless
told otherwise: both encodings, every input shape, dimensions, usage, bad requests (400 naming
the field), and embeddings served while a completion streams."""
import base64
import json
import struct
import threading
import urllib.request

import numpy as np
import openai
import pytest

from conftest import SOURCE, Server, metrics

GOLDEN = SOURCE / "build" / "golden" / "embedding" / "text.json"


@pytest.fixture(scope="module")
def golden():
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing: run `make goldens` (tools/oracle/embedding_goldens.py)")
    return json.loads(GOLDEN.read_text())


def start(golden, *args):
    return Server(list(args), model_dir=GOLDEN.parents[1] / golden["model"])


@pytest.fixture(scope="module")
def parity(golden):
    s = start(golden, "--parity")
    yield s
    assert s.stop() == 0, s.stderr_text()[-2000:]


@pytest.fixture(scope="module")
def fast(golden):
    s = start(golden)
    yield s
    assert s.stop() == 0, s.stderr_text()[-2000:]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def texts(golden):
    return [c["text"] for c in golden["cases"]]


def cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def test_parity_server_equals_mlx_lm_in_both_encodings(parity, golden):
    c = client(parity)
    default = c.embeddings.create(model=parity.model, input=texts(golden))  # the SDK's base64
    floats = c.embeddings.create(model=parity.model, input=texts(golden), encoding_format="float")
    assert default.object == "list" and default.model == parity.model
    for i, case in enumerate(golden["cases"]):
        want = np.asarray(case["embedding"], np.float32)
        for r in (default, floats):
            assert r.data[i].object == "embedding" and r.data[i].index == i
            assert np.array_equal(np.asarray(r.data[i].embedding, np.float32), want), case["text"]
    tokens = sum(len(case["ids"]) for case in golden["cases"])
    assert default.usage.prompt_tokens == tokens and default.usage.total_tokens == tokens


def test_raw_base64_is_little_endian_float32(parity, golden):
    case = golden["cases"][1]
    body = json.dumps({"model": parity.model, "input": case["text"], "encoding_format": "base64"}).encode()
    req = urllib.request.Request(parity.url + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        data = json.loads(r.read())["data"]
    raw = base64.b64decode(data[0]["embedding"])
    got = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert np.array_equal(np.asarray(got, np.float32), np.asarray(case["embedding"], np.float32))


def test_token_id_inputs_and_dimensions(parity, golden):
    c = client(parity)
    cases = golden["cases"]
    one = c.embeddings.create(model=parity.model, input=cases[0]["ids"], encoding_format="float")
    many = c.embeddings.create(model=parity.model, input=[x["ids"] for x in cases])
    assert np.array_equal(np.asarray(one.data[0].embedding, np.float32), np.asarray(cases[0]["embedding"], np.float32))
    for i, case in enumerate(cases):
        assert np.array_equal(np.asarray(many.data[i].embedding, np.float32), np.asarray(case["embedding"], np.float32))
    d = golden["dimensions"]
    short = c.embeddings.create(model=parity.model, input=texts(golden), dimensions=d)
    for i, case in enumerate(cases):
        assert len(short.data[i].embedding) == d
        assert np.array_equal(np.asarray(short.data[i].embedding, np.float32),
                              np.asarray(case["embedding_dim"], np.float32))


def test_fast_path_within_cosine(fast, golden):
    r = client(fast).embeddings.create(model=fast.model, input=texts(golden))
    for i, case in enumerate(golden["cases"]):
        v = np.asarray(r.data[i].embedding, np.float64)
        assert abs(np.linalg.norm(v) - 1) < 1e-5
        assert cosine(v, case["embedding"]) >= 0.9999, case["text"]


@pytest.mark.parametrize("extra, param", [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": ["a", 1]}, "input"),
    ({"input": [[1, 2], []]}, "input"),
    ({"input": [1, -2]}, "input"),
    ({"input": {"text": "a"}}, "input"),
    ({"input": "word " * 200}, "input"),  # over the tiny model's 128-token window
    ({"input": "a", "dimensions": 0}, "dimensions"),
    ({"input": "a", "dimensions": 100000}, "dimensions"),
    ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
])
def test_bad_requests_are_400_naming_the_field(fast, extra, param):
    body = {"model": fast.model, **extra}
    with pytest.raises(openai.BadRequestError) as e:
        client(fast).post("/embeddings", cast_to=object, body=body)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param, e.value.body
    assert e.value.body["message"]
    assert fast.alive()


def test_unknown_model_is_404(fast):
    with pytest.raises(openai.NotFoundError):
        client(fast).embeddings.create(model="nope", input="a")


def test_embeddings_while_a_completion_streams(fast, golden):
    c = client(fast)
    before = metrics(fast).get("mlxcpp_embedding_inputs_total", 0)
    text, done = [], threading.Event()

    def stream():
        for chunk in c.completions.create(model=fast.model, prompt="Once upon a time", max_tokens=48,
                                          stream=True, extra_body={"ignore_eos": True}):
            if chunk.choices:
                text.append(chunk.choices[0].text)
        done.set()

    t = threading.Thread(target=stream)
    t.start()
    results = [c.embeddings.create(model=fast.model, input=texts(golden)) for _ in range(3)]
    t.join(120)
    assert done.is_set() and "".join(text)
    for r in results:
        for i, case in enumerate(golden["cases"]):
            assert cosine(r.data[i].embedding, case["embedding"]) >= 0.9999
    assert metrics(fast)["mlxcpp_embedding_inputs_total"] == before + 3 * len(golden["cases"])
