"""OpenAI Responses API (POST /v1/responses) through the official `openai` SDK against the real
`mlxcpp serve` on SmolLM2-135M-Instruct: greedy parity with `mlxcpp generate`, the streamed
event chain, conversation state via previous_response_id, instructions, limits and errors."""
import openai
import pytest

from conftest import generate_cli

PROMPT = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120)


def create(client, server, input, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_output_tokens", 24)
    return client.responses.create(model=server.model, input=input, **kw)


def reference(prompt, *args):
    out = generate_cli("--prompt", prompt, *args)
    assert out.endswith("\n")
    return out[:-1]


def test_greedy_equals_generate(client, server):
    r = create(client, server, PROMPT)
    assert r.output_text == reference(PROMPT, "--max-tokens", "24")
    assert r.object == "response"
    assert r.id.startswith("resp_")
    assert r.model == server.model
    assert r.status in ("completed", "incomplete")
    assert r.error is None
    assert [item.type for item in r.output] == ["message"]
    msg = r.output[0]
    assert msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.status == r.status  # a message cut by max_output_tokens is "incomplete" too
    assert [c.type for c in msg.content] == ["output_text"]
    assert r.usage.output_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.max_output_tokens == 24 and r.temperature == 0
    assert r.store is True and r.previous_response_id is None


def test_stream_event_chain_equals_whole(client, server):
    whole = create(client, server, "Name three colors.", max_output_tokens=20)
    stream = create(client, server, "Name three colors.", max_output_tokens=20, stream=True)
    events = list(stream)
    types = [e.type for e in events]
    seqs = [e.sequence_number for e in events]
    assert seqs == list(range(len(events)))
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    n = types.count("response.output_text.delta")
    assert n > 0
    assert types[4:4 + n] == ["response.output_text.delta"] * n
    assert types[4 + n:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                             "response.completed" if whole.status == "completed" else "response.incomplete"]
    assert events[0].response.status == "in_progress"
    assert events[0].response.id == events[-1].response.id
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    done = next(e for e in events if e.type == "response.output_text.done")
    assert done.text == text
    item_id = events[2].item.id
    assert all(e.item_id == item_id for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert final.output_text == whole.output_text
    assert final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens


def test_sdk_stream_helper(client, server):
    # The SDK's accumulator checks item identities and ordering; a completed stream yields a
    # final response equal to the whole one.
    with client.responses.stream(model=server.model, input="Say hello.", temperature=0,
                                 max_output_tokens=200) as stream:
        events = list(stream)
    whole = create(client, server, "Say hello.", max_output_tokens=200)
    assert whole.status == "completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    assert events[-1].type == "response.completed"
    final = stream.get_final_response()
    assert final.output_text == whole.output_text
    assert final.id == events[0].response.id


def test_previous_response_id_continues(client, server):
    first_input = "My name is Alice. Please remember it."
    r1 = create(client, server, first_input, max_output_tokens=16)
    r2 = create(client, server, "What is my name?", previous_response_id=r1.id)
    assert r2.previous_response_id == r1.id
    assert r2.usage.input_tokens > r1.usage.input_tokens
    assert r2.usage.input_tokens_details.cached_tokens > 0
    # The same conversation sent explicitly gives the same greedy answer.
    r3 = create(client, server, [
        {"role": "user", "content": first_input},
        {"role": "assistant", "content": r1.output_text},
        {"role": "user", "content": "What is my name?"},
    ])
    assert r3.output_text == r2.output_text
    assert r3.usage.input_tokens == r2.usage.input_tokens
    # Chains continue: a third turn on top of the second.
    r4 = create(client, server, "Thanks.", previous_response_id=r2.id, max_output_tokens=8)
    assert r4.usage.input_tokens > r2.usage.input_tokens


def test_unknown_previous_response_id_is_404(client, server):
    with pytest.raises(openai.NotFoundError) as e:
        create(client, server, "Hi", previous_response_id="resp_doesnotexist")
    assert e.value.status_code == 404
    assert "resp_doesnotexist" in str(e.value)


def test_store_false_is_not_kept(client, server):
    r = create(client, server, "Hi", store=False, max_output_tokens=4)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        create(client, server, "Again", previous_response_id=r.id, max_output_tokens=4)


def test_instructions_are_a_system_message_not_carried_over(client, server):
    system = "You are a helpful pirate."
    r = create(client, server, PROMPT, instructions=system)
    assert r.instructions == system
    assert r.output_text == reference(PROMPT, "--system-prompt", system, "--max-tokens", "24")
    follow = create(client, server, "And of Spain?", previous_response_id=r.id, max_output_tokens=12)
    assert follow.instructions is None
    explicit = create(client, server, [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": r.output_text},
        {"role": "user", "content": "And of Spain?"},
    ], max_output_tokens=12)
    assert follow.output_text == explicit.output_text


def test_max_output_tokens_small_is_incomplete(client, server):
    r = create(client, server, "Write a long story about a dragon.", max_output_tokens=3)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    assert r.output_text == reference("Write a long story about a dragon.", "--max-tokens", "3")


def test_function_call_items_as_input(client, server):
    r = create(client, server, [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 24 C"},
    ], tools=[{"type": "function", "name": "get_weather", "description": "Current weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        max_output_tokens=8)
    assert r.status in ("completed", "incomplete")
    assert [t.name for t in r.tools] == ["get_weather"]


@pytest.mark.parametrize("kw, param", [
    ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "strnig"}}}}, "text.format"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
     "input[0].content[0].type"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
])
def test_bad_requests_name_the_field(client, server, kw, param):
    kw = dict(kw)
    input = kw.pop("input", "Hi")
    with pytest.raises(openai.BadRequestError) as e:
        create(client, server, input, **kw)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param


def test_retrieve_and_delete_a_stored_response(client, server):
    r = create(client, server, "Say hello.", max_output_tokens=8)
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
