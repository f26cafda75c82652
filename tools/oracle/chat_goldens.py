"""Goldens for src/chat: transformers' apply_chat_template(tokenize=False) over every chat template
of the fixture tokenizers (plus a few synthetic templates that exercise jinja2 features), for a
set of conversations x add_generation_prompt (or continue_final_message where the last message is
the assistant's) x enable_thinking.

Usage: .venv/bin/python tools/oracle/chat_goldens.py OUTDIR
Writes OUTDIR/chat/cases.json:
  now          the fixed "YYYY-MM-DD HH:MM:SS" strftime_now sees (datetime.now is pinned)
  templates    {name: {"source", "origin", "special_tokens"}}; fixtures without a template are
               listed under "no_template"
  cases        [{template, conversation, messages, tools, documents, add_generation_prompt,
                 continue_final_message,
                 kwargs, rendered | error}]; error = the exception transformers raised (the C++
                 side must raise too)
tests/chat/ re-renders every case and requires byte-identical output.
"""

import datetime as _dt
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fixtures  # noqa: E402

NOW = "2026-03-14 09:26:53"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web — returns snippets (ünïcode ok).",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}},
            "required": ["query"],
        },
    },
}

CONVERSATIONS = {
    "user_only": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_user": {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is 2+2?"},
        ]
    },
    "multi_turn": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a color."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one?"},
        ]
    },
    "tools": {
        "tools": [WEATHER_TOOL, SEARCH_TOOL],
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                    }
                ],
            },
            {"role": "tool", "content": '{"temp": 21.5, "sky": "clear"}', "tool_call_id": "call_1", "name": "get_weather"},
            {"role": "assistant", "content": "It is 21.5°C and clear in Paris."},
            {"role": "user", "content": "Thanks! And Tokyo?"},
        ],
    },
    "tools_no_system": {
        "tools": [WEATHER_TOOL],
        "messages": [{"role": "user", "content": "Is it raining in Oslo?"}],
    },
    "parallel_tool_calls": {
        "tools": [WEATHER_TOOL, SEARCH_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Rome and news about it."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                    {"id": "b", "type": "function", "function": {"name": "search", "arguments": {"query": "Rome news", "top_k": 2}}},
                ],
            },
            {"role": "tool", "content": "sunny, 25", "tool_call_id": "a", "name": "get_weather"},
            {"role": "tool", "content": "[\"snippet 1\", \"snippet 2\"]", "tool_call_id": "b", "name": "search"},
        ],
    },
    "thinking": {
        "messages": [
            {"role": "user", "content": "What is 17*3?"},
            {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51, easy."},
            {"role": "user", "content": "And 17*4?"},
        ]
    },
    "unicode": {
        "messages": [
            {"role": "system", "content": "Réponds en français. 答えてください。"},
            {"role": "user", "content": "👨‍👩‍👧 ¿Qué tal? مرحبا नमस्ते สวัสดี \"quotes\" and \\backslash\n\ttabs"},
            {"role": "assistant", "content": "Très bien 😀 — 谢谢!"},
            {"role": "user", "content": "<|im_start|> is just text here </s>"},
        ]
    },
    "content_parts": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
            {"role": "user", "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}]},
        ]
    },
    "assistant_last": {
        "messages": [
            {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": "Hi!"},
        ]
    },
    # Assistant prefill (continue_final_message): trailing whitespace the templates trim, parts.
    "assistant_prefill": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "The answer is "},
        ]
    },
    "assistant_prefill_parts": {
        "messages": [
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": [{"type": "text", "text": "Sure. "}, {"type": "text", "text": "My pick:"}]},
        ]
    },
}

# Templates that exercise jinja2 behaviour the real ones may not (rendered the same way).
SYNTHETIC = {
    "py_features": (
        "{%- for m in messages -%}\n"
        "{{ loop.index0 }}:{{ m.role | upper }}:{{ m.content.strip() | replace('!', '?') }}|{{ m.content.split(' ') | length }}\n"
        "{%- if m.role == 'assistant' %}{% continue %}{% endif %}\n"
        "{{ m.content.startswith('Hel') }} {{ m.content.endswith('!') }} {{ m.content[:3] }} {{ m.content.lstrip('H') }}\n"
        "{%- if loop.index > 5 %}{% break %}{% endif %}\n"
        "{% endfor %}\n"
        "{{ none }} {{ true }} {{ false }} {{ [1, 'a', none, true] }} {{ {'k': 1.5, 'n': none} }} {{ 2.0 }} {{ 1e20 }} {{ 7 // 2 }} {{ 7 / 2 }}\n"
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}\n"
        "{{ messages | map(attribute='role') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }}\n"
        "{{ 'a-b-c'.split('-') }} {{ ' x '.rstrip() }}| {{ 'abc'.upper() }} {{ 'Hello'.replace('l', 'L') }} {{ 'x' in 'xyz' }}\n"
        "{% if add_generation_prompt %}<gen>{% endif %}"
    ),
    "tojson_forms": (
        "{{ tools | tojson }}\n{{ tools | tojson(indent=2) }}\n{{ tools | tojson(sort_keys=true) }}\n"
        "{{ {'ü': 'é', 'n': [1, 2.5, none, true]} | tojson }}\n{{ {'ü': 'é'} | tojson(ensure_ascii=true) }}\n"
        "{{ 'quote\"back\\\\slash\\nnl\\u0001' | tojson }}\n{{ {'b': 1, 'a': {'d': [], 'c': {}}} | tojson(indent=4, sort_keys=true) }}\n"
        "{{ {'x': 1} | tojson(separators=(',', ':')) }}\n"
        "{% for m in messages %}{% if m.tool_calls is defined %}{{ m.tool_calls[0].function.arguments | tojson }}{% endif %}{% endfor %}"
    ),
    "raise_on_system": (
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        "[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    ),
    "strftime": "Today is {{ strftime_now('%d %B %Y') }} ({{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %j') }}).{{ messages[0].content }}",
    "whitespace_control": (
        "  {% for m in messages %}\n    {%- if m.role == 'user' %}\n  U: {{ m.content }}\n    {% else %}\n  O: {{ m.content }}\n    {% endif %}\n"
        "  {% endfor %}\n{#- comment #}\n  {%+ if true %}kept{% endif %}\n\ntrailing newline\n"
    ),
}

THINKING_OPTIONS = [None, True, False]


def pinned_now():
    class Fixed(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.strptime(NOW, "%Y-%m-%d %H:%M:%S")

    return Fixed


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    import transformers
    import transformers.utils.chat_template_utils as ctu

    ctu.datetime = pinned_now()  # strftime_now reads the module global
    out = os.path.join(sys.argv[1], "chat")
    os.makedirs(out, exist_ok=True)

    templates, no_template, renderers = {}, [], {}
    for name in fixtures.NAMES:
        tok = fixtures.load(name)
        ct = tok.chat_template
        if ct is None:
            no_template.append(name)
            continue
        named = ct if isinstance(ct, dict) else {"default": ct}
        for tname, source in named.items():
            key = name if tname == "default" else f"{name}:{tname}"
            templates[key] = {"source": source, "origin": name, "special_tokens": {k: str(v) for k, v in tok.special_tokens_map.items()}}
            renderers[key] = (tok, source)
    base_tok = fixtures.load("qwen3")
    for key, source in SYNTHETIC.items():
        templates["synthetic:" + key] = {"source": source, "origin": "synthetic", "special_tokens": {k: str(v) for k, v in base_tok.special_tokens_map.items()}}
        renderers["synthetic:" + key] = (base_tok, source)

    cases, n_ok, n_err = [], 0, 0
    for key, (tok, source) in renderers.items():
        for conv_name, conv in CONVERSATIONS.items():
            modes = [(False, False), (True, False)]  # (add_generation_prompt, continue_final_message)
            if conv["messages"][-1]["role"] == "assistant":
                modes.append((False, True))
            for agp, cont in modes:
                for thinking in THINKING_OPTIONS:
                    kwargs = {} if thinking is None else {"enable_thinking": thinking}
                    case = {
                        "template": key,
                        "conversation": conv_name,
                        "messages": conv["messages"],
                        "tools": conv.get("tools"),
                        "documents": conv.get("documents"),
                        "add_generation_prompt": agp,
                        "continue_final_message": cont,
                        "kwargs": kwargs,
                    }
                    try:
                        case["rendered"] = tok.apply_chat_template(
                            conv["messages"], tools=conv.get("tools"), documents=conv.get("documents"),
                            chat_template=source, add_generation_prompt=agp, continue_final_message=cont,
                            tokenize=False, **kwargs)
                        n_ok += 1
                    except Exception as e:  # recorded: the C++ side must raise too
                        case["error"] = f"{type(e).__name__}: {e}"
                        n_err += 1
                    cases.append(case)
    doc = {
        "now": NOW,
        "versions": {"transformers": transformers.__version__},
        "templates": templates,
        "no_template": no_template,
        "cases": cases,
    }
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    print(f"chat goldens: {len(templates)} templates, {len(cases)} cases ({n_ok} rendered, {n_err} raise); "
          f"no chat template: {', '.join(no_template)}")


if __name__ == "__main__":
    main()
