"""Model level: every realistic schema of tests/structured/schemas (117: tool calls, nested objects,
enums, bounded arrays, $ref, anyOf) as OpenAI response_format json_schema (strict) for SmolLM2
through the server, greedy and sampled with 2 seeds, 8 requests at a time (one batch). Every output
that stops normally parses and validates with Python jsonschema (formats checked too) and has no
JSON whitespace run above the default bound (20); outputs cut at max_tokens are counted, not
validated, and must stay a minority."""
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import openai
import pytest

SCHEMAS = Path(__file__).resolve().parents[1] / "structured" / "schemas" / "realistic.json"
MAX_WS = 20  # kDefaultJsonWhitespace
SAMPLINGS = [{"temperature": 0}, {"temperature": 0.8, "seed": 1}, {"temperature": 0.8, "seed": 2}]


def longest_json_whitespace(text):
    """The longest run of whitespace outside JSON strings."""
    best = run = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        run = run + 1 if c in " \t\n\r" else 0
        best = max(best, run)
    return best


def test_realistic_schemas_greedy_and_sampled(server):
    cases = json.loads(SCHEMAS.read_text())
    assert len(cases) >= 100
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)

    def one(job):
        i, sampling = job
        case = cases[i]
        r = client.chat.completions.create(
            model=server.model, max_tokens=160,
            messages=[{"role": "user", "content": f"Reply with a JSON object only. Task: {case['description']}"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": f"case{i}", "schema": case["schema"], "strict": True}},
            **sampling)
        return i, sampling, r.choices[0].finish_reason, r.choices[0].message.content

    jobs = [(i, s) for i in range(len(cases)) for s in SAMPLINGS]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, jobs))
    cut = 0
    problems = []
    for i, sampling, finish, text in results:
        if finish == "length":
            cut += 1
            continue
        where = f"{cases[i]['description']} {sampling}: {text!r}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            problems.append(f"{where} does not parse: {e}")
            continue
        schema = cases[i]["schema"]
        cls = jsonschema.validators.validator_for(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
        if errors:
            problems.append(f"{where} does not validate: {errors[0].message}")
        if longest_json_whitespace(text) > MAX_WS:
            problems.append(f"{where} has a whitespace run above {MAX_WS}")
    assert not problems, "\n".join(problems[:20])
    assert cut < len(results) // 4, f"{cut} of {len(results)} outputs ran into max_tokens"
    print(f"{len(results)} outputs, {len(results) - cut} stopped and validated, {cut} cut at max_tokens")


if __name__ == "__main__":
    pytest.main([__file__, "-s"])
