"""Model level: every realistic schema of tests/structured/schemas (117: tool calls, nested objects,
enums, bounded arrays, $ref, anyOf) as OpenAI response_format json_schema (strict), and every schema
of the JSON Schema Test Suite (draft 4) that compiles (llama-server's json_schema field), for SmolLM2
through the server, greedy and sampled with 2 seeds, 8 requests at a time (one batch). Every output
that stops normally parses and validates with Python jsonschema (formats checked too) and has no
JSON whitespace run above the default bound (20); outputs cut at max_tokens are counted, not
validated (at most a quarter of them; 60% for the suite's permissive schemas). A suite schema the
server refuses (400) must be one the ratchet lists as not compiling."""
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import openai
import pytest

STRUCTURED = Path(__file__).resolve().parents[1] / "structured"
SCHEMAS = STRUCTURED / "schemas" / "realistic.json"
SUITE = Path(__file__).resolve().parents[2] / "build" / "fixtures" / "node_modules" / "json-schema-test-suite" / "tests"
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


def check_outputs(results, max_cut_share):
    """results: (label, schema, finish_reason, text). Every output that stopped is valid JSON of its
    schema with bounded whitespace; at most max_cut_share of them ran into max_tokens."""
    cut, problems = 0, []
    for label, schema, finish, text in results:
        if finish == "length":
            cut += 1
            continue
        where = f"{label}: {text!r}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            problems.append(f"{where} does not parse: {e}")
            continue
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft4Validator)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
        if errors:
            problems.append(f"{where} does not validate: {errors[0].message}")
        if longest_json_whitespace(text) > MAX_WS:
            problems.append(f"{where} has a whitespace run above {MAX_WS}")
    assert not problems, "\n".join(problems[:20])
    assert cut <= max_cut_share * len(results), f"{cut} of {len(results)} outputs ran into max_tokens"
    print(f"{len(results)} outputs, {len(results) - cut} stopped and validated, {cut} cut at max_tokens")


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
        return f"{case['description']} {sampling}", case["schema"], r.choices[0].finish_reason, r.choices[0].message.content

    with ThreadPoolExecutor(8) as pool:
        check_outputs(list(pool.map(one, [(i, s) for i in range(len(cases)) for s in SAMPLINGS])), 0.25)


def test_json_schema_test_suite_greedy_and_sampled(server):
    if not (SUITE / "draft4").exists():
        pytest.skip(f"{SUITE} is missing (run `make fixtures`)")
    not_compiling = {line.split(" ", 1)[1].rsplit(" / (compile)", 1)[0]
                     for line in (STRUCTURED / "ratchet.txt").read_text().splitlines()
                     if line.startswith("smollm2 draft4/") and line.endswith(" / (compile)")}
    groups = []
    for f in sorted((SUITE / "draft4").rglob("*.json")):
        rel = "draft4/" + f.relative_to(SUITE / "draft4").as_posix()
        for g in json.loads(f.read_text()):
            groups.append((f"{rel}: {g['description']}", g["schema"]))
    assert len(groups) > 80
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)

    def one(job):
        (label, schema), sampling = job
        try:
            r = client.chat.completions.create(
                model=server.model, max_tokens=128, extra_body={"json_schema": schema}, **sampling,
                messages=[{"role": "user", "content": "Reply with one short JSON value, nothing else."}])
        except openai.BadRequestError as e:
            return label, schema, "refused", str(e)
        return f"{label} {sampling}", schema, r.choices[0].finish_reason, r.choices[0].message.content

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, [(g, s) for g in groups for s in SAMPLINGS]))
    refused = {label for label, _, finish, _ in results if finish == "refused"}
    assert refused == not_compiling, (sorted(refused - not_compiling), sorted(not_compiling - refused))
    # The suite's schemas are permissive ({}, "items": [{}], any string): values run on more often
    # (a string of "I am the wizard, ..."): 42-81 of 198 here, depending on what the server ran before.
    check_outputs([r for r in results if r[2] != "refused"], 0.6)


if __name__ == "__main__":
    pytest.main([__file__, "-s"])
