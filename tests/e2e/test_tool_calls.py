"""Tool calls end to end: SmolLM2 with the Qwen3 fixture template (ChatML, Hermes-style
<tool_call> format) and tool_choice naming a tool, so the call is forced by the generation
prompt; each protocol returns it as a structured call, streamed and not."""
import json
from pathlib import Path

import anthropic
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
