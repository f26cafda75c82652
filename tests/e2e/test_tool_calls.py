"""Tool calls end to end: SmolLM2 with the Qwen3 fixture template (ChatML, Hermes-style
<tool_call> format) and tool_choice naming a tool, so the call is forced by the generation
prompt; each protocol returns it as a structured call, streamed and not. Strict tools: the call
is held to the format and the tool's schema (chat/tool_grammar.h), also in Mistral's and Gemma 4's
call formats."""
import json
from pathlib import Path

import anthropic
import jsonschema
import openai
import pytest

from conftest import FIXTURES

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


@pytest.fixture(scope="module")
def tool_server(start_server, tmp_path_factory):
    cfg = FIXTURES / "tokenizer-qwen3" / "models" / "tokenizer_config.json"
    if not cfg.exists():
        pytest.skip(f"{cfg} is missing (make fixtures)")
    template = json.loads(cfg.read_text())["chat_template"]
    path = tmp_path_factory.mktemp("tpl") / "qwen3.jinja"
    path.write_text(template)
    s = start_server("--chat-template-file", str(path))
    return s


def test_openai_forced_call(tool_server):
    c = openai.OpenAI(base_url=tool_server.url + "/v1", api_key="x", max_retries=0)
    choice = {"type": "function", "function": {"name": "get_weather"}}
    r = c.chat.completions.create(model=tool_server.model, messages=ASK, tools=TOOLS, tool_choice=choice,
                                  temperature=0, max_tokens=40)
    calls = r.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather" and calls[0].id
    assert r.choices[0].finish_reason in ("tool_calls", "length")
    stream = c.chat.completions.create(model=tool_server.model, messages=ASK, tools=TOOLS, tool_choice=choice,
                                       temperature=0, max_tokens=40, stream=True)
    name, args, ids = None, "", set()
    for chunk in stream:
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                if tc.function.name:
                    name = tc.function.name
                    ids.add(tc.id)
                args += tc.function.arguments or ""
    assert name == "get_weather" and len(ids) == 1
    assert args == calls[0].function.arguments


def test_tool_choice_none_and_auto_text(tool_server):
    c = openai.OpenAI(base_url=tool_server.url + "/v1", api_key="x", max_retries=0)
    r = c.chat.completions.create(model=tool_server.model, messages=ASK, tools=TOOLS, tool_choice="none",
                                  temperature=0, max_tokens=16)
    assert not r.choices[0].message.tool_calls
    assert r.choices[0].message.content


def test_anthropic_forced_call(tool_server):
    c = anthropic.Anthropic(base_url=tool_server.url, api_key="x", max_retries=0)
    tools = [{"name": "get_weather", "description": "Current weather for a city",
              "input_schema": TOOLS[0]["function"]["parameters"]}]
    m = c.messages.create(model=tool_server.model, max_tokens=40, messages=ASK, tools=tools,
                          tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in m.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather"
    with c.messages.stream(model=tool_server.model, max_tokens=40, messages=ASK, tools=tools,
                           tool_choice={"type": "tool", "name": "get_weather"}) as s:
        final = s.get_final_message()
    assert [b.name for b in final.content if b.type == "tool_use"] == ["get_weather"]


def test_responses_forced_call(tool_server):
    c = openai.OpenAI(base_url=tool_server.url + "/v1", api_key="x", max_retries=0)
    tools = [{"type": "function", "name": "get_weather", "description": "Current weather for a city",
              "parameters": TOOLS[0]["function"]["parameters"]}]
    r = c.responses.create(model=tool_server.model, input=ASK[0]["content"], tools=tools,
                           tool_choice={"type": "function", "name": "get_weather"}, temperature=0,
                           max_output_tokens=40)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id
    # Responses tools are strict by default: the forced call's arguments follow the schema.
    jsonschema.validate(json.loads(calls[0].arguments), tools[0]["parameters"])


STRICT_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city", "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "unit": {"type": "string", "enum": ["C", "F"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a time zone", "strict": True,
        "parameters": {"type": "object", "properties": {"tz": {"type": "string", "pattern": "^[A-Z]{3}$"}},
                       "required": ["tz"], "additionalProperties": False}}},
]


def schema_of(name):
    return next(t["function"]["parameters"] for t in STRICT_TOOLS if t["function"]["name"] == name)


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "get_weather"}}, "required"])
def test_strict_forced_call_follows_the_schema(tool_server, choice):
    """tool_choice named or required with strict tools: the call is held to the model's format and the
    tool's schema (llguidance), arrives as tool_calls with finish_reason tool_calls; streamed = not."""
    check_strict_forced_call(tool_server, choice)


@pytest.fixture(scope="module", params=["mistral_json", "gemma4"])
def format_server(request, start_server, tmp_path_factory):
    """SmolLM2 speaking another call format: Mistral Nemo's own template (its JSON array form,
    detected from the template; [TOOL_CALLS] is text in SmolLM2's vocabulary), or the Qwen3 template
    with --tool-call-format gemma4 (call:NAME{key:<|"|>value<|"|>}: no Gemma 4 template is available)."""
    package = "tokenizer-mistral_nemo" if request.param == "mistral_json" else "tokenizer-qwen3"
    cfg = FIXTURES / package / "models" / "tokenizer_config.json"
    if not cfg.exists():
        pytest.skip(f"{cfg} is missing (make fixtures)")
    path = tmp_path_factory.mktemp("tpl") / f"{request.param}.jinja"
    path.write_text(json.loads(cfg.read_text())["chat_template"])
    args = ["--chat-template-file", str(path)]
    if request.param == "gemma4":
        args += ["--tool-call-format", "gemma4"]
    return start_server(*args), request.param


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "get_weather"}}, "required"])
def test_strict_forced_call_in_other_formats(format_server, choice):
    """The same strict forced calls in Mistral's JSON array form and Gemma 4's key:value form (greedy
    only for Gemma 4: sampled at temperature 1, SmolLM2, which never saw the <|"|> delimiter, runs a
    string on to max_tokens; the grammar lets a string be any text)."""
    server, fmt = format_server
    check_strict_forced_call(server, choice, sampled=fmt != "gemma4")


def check_strict_forced_call(server, choice, sampled=True):
    """A forced call (named or required) over strict tools: it arrives as tool_calls with finish_reason
    tool_calls, arguments valid under the tool's schema; streamed = not; sampled too (two seeds)."""
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    r = c.chat.completions.create(model=server.model, messages=ASK, tools=STRICT_TOOLS, tool_choice=choice,
                                  temperature=0, max_tokens=60)
    assert r.choices[0].finish_reason == "tool_calls"
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1
    jsonschema.validate(json.loads(calls[0].function.arguments), schema_of(calls[0].function.name))
    stream = c.chat.completions.create(model=server.model, messages=ASK, tools=STRICT_TOOLS, tool_choice=choice,
                                       temperature=0, max_tokens=60, stream=True)
    name, args = None, ""
    for chunk in stream:
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                name = tc.function.name or name
                args += tc.function.arguments or ""
    assert (name, args) == (calls[0].function.name, calls[0].function.arguments)
    # Sampled (two seeds): still a valid call.
    for seed in (1, 2) if sampled else ():
        s = c.chat.completions.create(model=server.model, messages=ASK, tools=STRICT_TOOLS, tool_choice=choice,
                                      temperature=1.0, seed=seed, max_tokens=80)
        sc = s.choices[0].message.tool_calls
        assert s.choices[0].finish_reason == "tool_calls" and len(sc) == 1, s
        jsonschema.validate(json.loads(sc[0].function.arguments), schema_of(sc[0].function.name))


def test_strict_auto_lets_text_answer(tool_server):
    """auto + strict: free text runs until a call would open (the model answers in text here)."""
    c = openai.OpenAI(base_url=tool_server.url + "/v1", api_key="x", max_retries=0)
    r = c.chat.completions.create(model=tool_server.model, messages=[{"role": "user", "content": "Say hello."}],
                                  tools=STRICT_TOOLS, temperature=0, max_tokens=16)
    assert r.choices[0].finish_reason == "length" and len(r.choices[0].message.content) > 20
    assert not r.choices[0].message.tool_calls
    assert "<tool_call>" not in r.choices[0].message.content


def test_anthropic_strict_tool(tool_server):
    c = anthropic.Anthropic(base_url=tool_server.url, api_key="x", max_retries=0)
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"], "strict": True,
              "input_schema": t["function"]["parameters"]} for t in STRICT_TOOLS]
    m = c.messages.create(model=tool_server.model, max_tokens=60, messages=ASK, tools=tools,
                          tool_choice={"type": "any"})
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1 and m.stop_reason == "tool_use"
    jsonschema.validate(uses[0].input, schema_of(uses[0].name))


def test_strict_tool_with_response_format_is_a_400(tool_server):
    c = openai.OpenAI(base_url=tool_server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=tool_server.model, messages=ASK, tools=STRICT_TOOLS, tool_choice="required",
                                  response_format={"type": "json_object"}, max_tokens=8)
    assert "response_format" in str(e.value)
