"""Structured output through the OpenAI SDK: chat/completions response_format json_object and
json_schema (strict), streamed and not, greedy and sampled (n=2, seeded); the content parses and
follows the schema. A schema llguidance cannot compile is a 400 carrying its message; a grammar that
fails mid-stream ends its own request with an error, not the batch's others."""
import json
import re
import threading

import openai
import pytest

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3},
    },
    "required": ["name", "age", "role", "tags"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a user of a web shop as JSON."}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def check_person(text):
    # JSON whitespace is bounded by default (kDefaultJsonWhitespace: no run longer than 20).
    assert max((len(m) for m in re.findall(r"\s+", text)), default=0) <= 20, repr(text)
    v = json.loads(text)
    assert set(v) == {"name", "age", "role", "tags"}, text
    assert isinstance(v["name"], str) and len(v["name"]) <= 30, text
    assert isinstance(v["age"], int) and 0 <= v["age"] <= 120, text
    assert v["role"] in ("admin", "user", "guest"), text
    assert 1 <= len(v["tags"]) <= 3 and all(isinstance(t, str) and len(t) <= 12 for t in v["tags"]), text


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}


def test_json_schema_greedy(client, server):
    r = client.chat.completions.create(model=server.model, messages=ASK, max_tokens=200, temperature=0,
                                       response_format=schema_format(PERSON))
    assert r.choices[0].finish_reason == "stop"
    check_person(r.choices[0].message.content)
    # Streamed, the same request gives the same text.
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=server.model, messages=ASK, max_tokens=200, temperature=0, stream=True,
        response_format=schema_format(PERSON)) if c.choices)
    assert streamed == r.choices[0].message.content


def test_json_schema_sampled_choices(client, server):
    r = client.chat.completions.create(model=server.model, messages=ASK, max_tokens=200, temperature=0.9, seed=7,
                                       n=2, response_format=schema_format(PERSON))
    assert len(r.choices) == 2
    for c in r.choices:
        assert c.finish_reason == "stop"
        check_person(c.message.content)


def test_json_schema_streamed(client, server):
    stream = client.chat.completions.create(model=server.model, messages=ASK, max_tokens=200, temperature=0.7,
                                            seed=3, stream=True, response_format=schema_format(PERSON))
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    check_person(text)


def test_json_object(client, server):
    # Any object: nothing bounds its strings, so a short answer is asked for (SmolLM2 greedy
    # otherwise repeats a key to the token limit).
    r = client.chat.completions.create(model=server.model, max_tokens=300, temperature=0,
                                       messages=[{"role": "user", "content": "Reply with a JSON object with the "
                                                  "keys name and color of a cat. Keep it short."}],
                                       response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_schema_that_does_not_compile_is_400(client, server):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=ASK, max_tokens=20,
                                       response_format=schema_format({"type": "strnig"}))
    assert "strnig" in str(e.value)
    assert e.value.body.get("param") == "response_format"


def test_responses_text_format_json_schema(client, server):
    r = client.responses.create(model=server.model, input="Describe a user of a web shop as JSON.",
                                max_output_tokens=200, temperature=0,
                                text={"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                                                 "strict": True}})
    assert r.status == "completed"
    assert r.text.format.type == "json_schema"
    check_person(r.output_text)


# llama-server's and vLLM's fields for the same constraints (through extra_body, as users send them).
def test_llama_server_json_schema(client, server):
    r = client.chat.completions.create(model=server.model, messages=ASK, max_tokens=200, temperature=0,
                                       extra_body={"json_schema": PERSON})
    check_person(r.choices[0].message.content)


def test_lark_grammar_and_vllm_choice(client, server):
    ask = [{"role": "user", "content": "Is water wet? Answer yes or no."}]
    r = client.chat.completions.create(model=server.model, messages=ask, max_tokens=10, temperature=0,
                                       extra_body={"grammar": 'start: "yes" | "no"'})
    assert r.choices[0].message.content in ("yes", "no")
    for body in ({"guided_choice": ["Paris", "Lyon", "Nice?"]},
                 {"structured_outputs": {"choice": ["Paris", "Lyon", "Nice?"]}}):
        r = client.chat.completions.create(model=server.model, max_tokens=10, temperature=0.7, seed=1,
                                           messages=[{"role": "user", "content": "A French city?"}], extra_body=body)
        assert r.choices[0].message.content in ("Paris", "Lyon", "Nice?"), body


def test_completions_guided_regex_and_json(client, server):
    r = client.completions.create(model=server.model, prompt="Three digits:", max_tokens=10, temperature=0,
                                  extra_body={"guided_regex": "[0-9]{3}"})
    text = r.choices[0].text
    assert len(text) == 3 and text.isdigit(), text
    r = client.completions.create(model=server.model, prompt="A user as JSON:", max_tokens=200, temperature=0,
                                  extra_body={"guided_json": json.dumps(PERSON)})
    check_person(r.choices[0].text)


@pytest.mark.parametrize("body, param, words", [
    ({"grammar": 'root ::= "a"'}, "grammar", "GBNF"),
    ({"guided_regex": "[0-9]+", "response_format": {"type": "json_object"}}, "guided_regex", "give one"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs", "exactly one"),
    ({"guided_choice": []}, "guided_choice", "non-empty"),
    ({"guided_json": "{not json"}, "guided_json", "JSON schema"),
])
def test_bad_constraint_fields_are_400(client, server, body, param, words):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=ASK, max_tokens=5, extra_body=body)
    assert e.value.body.get("param") == param, e.value.body
    assert words in str(e.value), str(e.value)


# Anthropic's structured outputs: output_format json_schema constrains the text block.
def test_anthropic_output_format(server):
    import anthropic
    client = anthropic.Anthropic(base_url=server.url, api_key="unused")
    r = client.messages.create(model=server.model, max_tokens=200, messages=ASK,  # temperature: this SDK's extra_body
                               extra_body={"temperature": 0, "output_format": {"type": "json_schema", "schema": PERSON}})
    check_person(r.content[0].text)
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=server.model, max_tokens=20, messages=ASK,
                               extra_body={"output_format": {"type": "json_schema", "schema": {"type": "strnig"}}})
    assert "strnig" in str(e.value)


# A Lark grammar so ambiguous that llguidance gives up after a few tokens (more than 2000 Earley
# items in a row: "ParserTooComplex"). The request it constrains ends with an error (a 400 naming the
# grammar, or an error event in its stream) after only text the grammar allowed; a request beside it in the same
# batch runs to its end.
AMBIGUOUS = "start: s\ns: " + " | ".join(" ".join(["s"] * k) for k in range(2, 16)) + ' | "a" | "b"\n'
A_PROMPT = "Repeat the letter a many times: aaaaaaaaaaaaaaaa"


def test_grammar_failing_mid_stream_ends_only_its_request(client, server):
    out = {}

    def beside():
        out["free"] = client.completions.create(model=server.model, prompt="Count: one, two,", max_tokens=300,
                                                temperature=0, extra_body={"ignore_eos": True})

    t = threading.Thread(target=beside)
    t.start()
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=server.model, prompt=A_PROMPT, max_tokens=100, temperature=0,
                                  extra_body={"grammar": AMBIGUOUS})
    assert "[grammar]" in str(e.value) and "Parser" in str(e.value), str(e.value)
    t.join(timeout=120)
    assert out["free"].usage.completion_tokens == 300
    texts = []
    with pytest.raises(openai.APIError) as e:
        for chunk in client.completions.create(model=server.model, prompt=A_PROMPT, max_tokens=100,
                                               temperature=0, stream=True, extra_body={"grammar": AMBIGUOUS}):
            texts.append(chunk.choices[0].text if chunk.choices else "")
    assert "[grammar]" in str(e.value), str(e.value)
    assert re.fullmatch(r"[ab]*", "".join(texts)), texts
    # Both choices of an n=2 request fail: one error, and the server goes on.
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=server.model, prompt=A_PROMPT, max_tokens=100, temperature=0.5, seed=4,
                                  n=2, extra_body={"grammar": AMBIGUOUS})
    r = client.completions.create(model=server.model, prompt="Count: one, two,", max_tokens=5, temperature=0)
    assert r.choices[0].text
