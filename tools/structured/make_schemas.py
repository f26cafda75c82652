"""Writes tests/structured/schemas/realistic.json: realistic JSON schemas (tool definitions,
nested objects, enums, arrays with bounds, $ref, anyOf, patterns, numbers) with valid and invalid
instances, in the JSON Schema Test Suite's format. Every label is checked with `jsonschema`
(Draft 2020-12) before writing, so a wrong hand-written label fails here, not in the C++ test.

    python tools/structured/make_schemas.py tests/structured/schemas/realistic.json
"""

import itertools
import json
import sys

import jsonschema


def obj(props, required=None, extra=False):
    s = {"type": "object", "properties": props, "required": list(required if required is not None else props)}
    if not extra:
        s["additionalProperties"] = False
    return s


def tool(name, params):
    """An OpenAI-style tool call: {"name": ..., "arguments": {...}}."""
    return obj({"name": {"const": name}, "arguments": params})


CASES = []


def case(desc, schema, valid, invalid):
    CASES.append((desc, schema, valid, invalid))


# --- tool definitions --------------------------------------------------------------------------
case("weather tool", tool("get_weather", obj({"city": {"type": "string", "minLength": 1},
                                              "unit": {"enum": ["celsius", "fahrenheit"]}}, ["city"])),
     [{"name": "get_weather", "arguments": {"city": "Paris"}},
      {"name": "get_weather", "arguments": {"city": "Tōkyō", "unit": "celsius"}}],
     [{"name": "get_weather", "arguments": {}}, {"name": "get_time", "arguments": {"city": "Paris"}},
      {"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}])
case("search tool", tool("search", obj({"query": {"type": "string"},
                                        "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, ["query"])),
     [{"name": "search", "arguments": {"query": "llguidance", "limit": 10}},
      {"name": "search", "arguments": {"query": ""}}],
     [{"name": "search", "arguments": {"query": "x", "limit": 0}},
      {"name": "search", "arguments": {"query": "x", "limit": 2.5}},
      {"name": "search", "arguments": {"query": 3}}])
case("send email tool", tool("send_email", obj({
    "to": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9.]+\\.[a-z]{2,}$"},
           "minItems": 1, "maxItems": 3},
    "subject": {"type": "string", "maxLength": 40}, "body": {"type": "string"}}, ["to", "body"])),
     [{"name": "send_email", "arguments": {"to": ["a@b.com"], "body": "hi"}},
      {"name": "send_email", "arguments": {"to": ["x.y@mail.example.org", "z@q.io"], "subject": "Re: plan",
                                           "body": "Line 1\nLine 2 \"quoted\""}}],
     [{"name": "send_email", "arguments": {"to": [], "body": "hi"}},
      {"name": "send_email", "arguments": {"to": ["not-an-email"], "body": "hi"}},
      {"name": "send_email", "arguments": {"to": ["a@b.com", "c@d.com", "e@f.com", "g@h.com"], "body": "x"}}])
case("calendar tool", tool("create_event", obj({
    "title": {"type": "string"}, "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
    "duration_minutes": {"type": "integer", "enum": [15, 30, 45, 60, 90]},
    "attendees": {"type": "array", "items": {"type": "string"}, "maxItems": 5}}, ["title", "date"])),
     [{"name": "create_event", "arguments": {"title": "Standup", "date": "2026-12-05", "duration_minutes": 15}},
      {"name": "create_event", "arguments": {"title": "Lunch", "date": "2027-01-01", "attendees": []}}],
     [{"name": "create_event", "arguments": {"title": "Standup", "date": "05/12/2026"}},
      {"name": "create_event", "arguments": {"title": "x", "date": "2026-12-05", "duration_minutes": 20}}])
case("shell tool", tool("run_command", obj({"command": {"type": "string"},
                                            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                                            "env": {"type": "object", "additionalProperties": {"type": "string"}}},
                                           ["command"])),
     [{"name": "run_command", "arguments": {"command": "ls -la", "timeout_s": 0.5}},
      {"name": "run_command", "arguments": {"command": "env", "env": {"A": "1", "PATH": "/bin"}}}],
     [{"name": "run_command", "arguments": {"command": "ls", "timeout_s": 0}},
      {"name": "run_command", "arguments": {"command": "ls", "env": {"A": 1}}},
      {"name": "run_command", "arguments": {"command": "ls", "shell": "bash"}}])

# A family of tools built from parameter types (one schema per (tool, parameter kind)).
PARAMS = {
    "string": ({"type": "string"}, ["abc", "", "naïve ünïcödé ✓"], [1, None, ["a"]]),
    "bounded string": ({"type": "string", "minLength": 2, "maxLength": 5}, ["ab", "abcde"], ["a", "abcdef", 3]),
    "integer": ({"type": "integer"}, [0, -7, 123456], [1.5, "1", True]),
    "range": ({"type": "integer", "minimum": -10, "maximum": 10}, [-10, 0, 10], [-11, 11, 0.5]),
    "number": ({"type": "number"}, [0, 3.25, -1e-3, 12345.678], ["3", None]),
    "positive number": ({"type": "number", "exclusiveMinimum": 0}, [0.001, 5, 1e3], [0, -2.5]),
    "boolean": ({"type": "boolean"}, [True, False], ["true", 0]),
    "enum": ({"enum": ["low", "medium", "high"]}, ["low", "high"], ["LOW", "", 1]),
    "nullable": ({"type": ["string", "null"]}, ["x", None], [0, False]),
    "int list": ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4}, [[1], [1, 2, 3, 4]],
                 [[], [1, 2, 3, 4, 5], [1, "2"]]),
    "string set": ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}, [[], ["a", "c"]], [["d"], ["a", "b", "c", "a"]]),
    "point": (obj({"x": {"type": "number"}, "y": {"type": "number"}}), [{"x": 1, "y": -2.5}], [{"x": 1}, {"x": 1, "y": 2, "z": 3}]),
    "hex color": ({"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"}, ["#00ff7F", "#ABCDEF"], ["00ff7f", "#00ff7", "#GGGGGG"]),
    "const": ({"const": "v1"}, ["v1"], ["v2", 1]),
}
TOOLS = ["lookup", "update_record", "set_option", "translate", "classify", "schedule"]
for tname, (pname, (pschema, good, bad)) in itertools.product(TOOLS, PARAMS.items()):
    arg = pname.replace(" ", "_")
    params = obj({arg: pschema, "note": {"type": "string", "maxLength": 20}}, [arg])
    valid = [{"name": tname, "arguments": {arg: g}} for g in good]
    valid.append({"name": tname, "arguments": {arg: good[0], "note": "ok"}})
    invalid = [{"name": tname, "arguments": {arg: b}} for b in bad]
    invalid.append({"name": tname, "arguments": {"note": "missing"}})
    case(f"tool {tname} with a {pname} parameter", tool(tname, params), valid, invalid)

# --- nested objects, $ref, anyOf, patterns, numbers ---------------------------------------------
address = obj({"street": {"type": "string"}, "city": {"type": "string"},
               "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, ["city"])
case("person with $ref address", {
    "$defs": {"address": address},
    **obj({"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
           "home": {"$ref": "#/$defs/address"}, "work": {"$ref": "#/$defs/address"}}, ["name", "home"])},
     [{"name": "Ada", "home": {"city": "London"}},
      {"name": "Bo", "age": 33, "home": {"street": "1 Main St", "city": "Oslo", "zip": "01234"},
       "work": {"city": "Bergen"}}],
     [{"name": "Ada", "home": {"zip": "12345"}}, {"name": "Ada", "age": -1, "home": {"city": "x"}},
      {"name": "Ada", "home": {"city": "x", "zip": "1234"}}])
tree = {"$defs": {"node": obj({"value": {"type": "integer"},
                               "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
                              ["value"])}, "$ref": "#/$defs/node"}
case("recursive tree", tree,
     [{"value": 1}, {"value": 1, "children": [{"value": 2}, {"value": 3, "children": [{"value": 4}]}]}],
     [{"value": "1"}, {"value": 1, "children": [{"val": 2}]}, {"children": []}])
case("anyOf shapes", {"anyOf": [obj({"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}),
                                obj({"kind": {"const": "rect"}, "w": {"type": "number"}, "h": {"type": "number"}})]},
     [{"kind": "circle", "r": 2}, {"kind": "rect", "w": 1, "h": 2.5}],
     [{"kind": "circle", "w": 1, "h": 2}, {"kind": "triangle"}, {"kind": "circle", "r": -1}])
case("anyOf scalar", {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[A-Z]{3}$"}]},
     [5, "EUR"], ["eur", 1.5, None])
case("oneOf-free union of arrays", {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                              {"type": "array", "items": {"type": "string"}}]},
     [[1, 2], ["a"], []], [[1, "a"], {"a": 1}])
case("order with line items", obj({
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{4,8}$"},
    "items": {"type": "array", "minItems": 1, "maxItems": 5, "items": obj({
        "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 99},
        "price": {"type": "number", "minimum": 0}})},
    "status": {"enum": ["pending", "paid", "shipped"]}}),
     [{"order_id": "ORD-0001", "items": [{"sku": "A1", "qty": 2, "price": 9.99}], "status": "paid"},
      {"order_id": "ORD-12345678", "items": [{"sku": "B", "qty": 99, "price": 0}] * 2, "status": "pending"}],
     [{"order_id": "ORD-1", "items": [{"sku": "A1", "qty": 2, "price": 1}], "status": "paid"},
      {"order_id": "ORD-0001", "items": [], "status": "paid"},
      {"order_id": "ORD-0001", "items": [{"sku": "A1", "qty": 0, "price": 1}], "status": "paid"},
      {"order_id": "ORD-0001", "items": [{"sku": "A1", "qty": 1, "price": 1}], "status": "lost"}])
case("sentiment classification", obj({"label": {"enum": ["positive", "negative", "neutral"]},
                                      "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
     [{"label": "positive", "confidence": 0.93}, {"label": "neutral", "confidence": 1}],
     [{"label": "positive", "confidence": 1.5}, {"label": "mixed", "confidence": 0.5}, {"label": "negative"}])
case("entity extraction", obj({"entities": {"type": "array", "items": obj({
    "text": {"type": "string"}, "type": {"enum": ["PERSON", "ORG", "LOC"]},
    "start": {"type": "integer", "minimum": 0}, "end": {"type": "integer", "minimum": 0}})}}),
     [{"entities": []}, {"entities": [{"text": "Paris", "type": "LOC", "start": 0, "end": 5}]}],
     [{"entities": [{"text": "Paris", "type": "CITY", "start": 0, "end": 5}]}, {"entities": {}}])
case("optional fields only", obj({"a": {"type": "integer"}, "b": {"type": "string"}}, []),
     [{}, {"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}], [{"c": 1}, {"a": "1"}, []])
case("open object", {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
     [{"id": 1}, {"id": 2, "extra": [1, {"x": None}]}], [{"extra": 1}, {"id": "1"}])
case("map of integers", {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 3},
     [{}, {"a": 1, "b": 2}], [{"a": "1"}, {"a": 1, "b": 2, "c": 3, "d": 4}])
case("semver string", {"type": "string", "pattern": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$"},
     ["1.2.3", "0.0.0", "10.20.30"], ["1.2", "01.2.3", "v1.2.3"])
case("phone pattern", obj({"phone": {"type": "string", "pattern": "^\\+[1-9][0-9]{7,14}$"}}),
     [{"phone": "+4915112345678"}], [{"phone": "0151 1234"}, {"phone": "+0123456789"}])
case("uuid pattern", {"type": "string",
                      "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
     ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "123E4567-E89B-12D3-A456-42661417400"])
case("percent integer", {"type": "integer", "minimum": 0, "maximum": 100}, [0, 55, 100], [101, -1, 50.5])
case("negative range number", {"type": "number", "minimum": -273.15, "maximum": 1000}, [-273.15, 0, 999.5],
     [-300, 1000.5])
case("exclusive bounds", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0.5, 0.001, 0.999],
     [0, 1, 2])
case("multiple of 5", {"type": "integer", "multipleOf": 5}, [0, 5, -15, 100], [3, 7])
case("matrix 2x2", {"type": "array", "minItems": 2, "maxItems": 2,
                    "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "number"}}},
     [[[1, 0], [0, 1]], [[0.5, -2], [3, 4e2]]], [[[1, 0]], [[1, 0, 0], [0, 1, 0]], [[1, "0"], [0, 1]]])
case("tuple prefixItems", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [["a", 1], ["a"], []], [["a", 1, 2], [1, "a"]])
case("array of enums unique-free", {"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 2},
     [[1, 1], [3, 2, 1]], [[1], [4, 1]])
case("deeply nested config", obj({"server": obj({"host": {"type": "string"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                                  "tls": obj({"enabled": {"type": "boolean"}, "cert": {"type": "string"}}, ["enabled"])}),
                                  "workers": {"type": "integer", "minimum": 1, "maximum": 64}}),
     [{"server": {"host": "0.0.0.0", "port": 8080, "tls": {"enabled": False}}, "workers": 4},
      {"server": {"host": "h", "port": 443, "tls": {"enabled": True, "cert": "/etc/c.pem"}}, "workers": 64}],
     [{"server": {"host": "h", "port": 0, "tls": {"enabled": False}}, "workers": 1},
      {"server": {"host": "h", "port": 80, "tls": {}}, "workers": 1},
      {"server": {"host": "h", "port": 80, "tls": {"enabled": False}}, "workers": 0}])
case("allOf merge", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}], [{"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}])
case("nullable nested", obj({"parent": {"anyOf": [{"type": "null"}, obj({"id": {"type": "integer"}})]}}),
     [{"parent": None}, {"parent": {"id": 3}}], [{"parent": {}}, {"parent": 3}])
case("string with escapes", obj({"text": {"type": "string", "maxLength": 30}}),
     [{"text": "tab\there"}, {"text": "quote \" and \\ slash"}, {"text": "emoji 😀"}],
     [{"text": "x" * 31}, {"text": None}])
case("boolean flags", obj({f"flag_{c}": {"type": "boolean"} for c in "abcd"}),
     [{"flag_a": True, "flag_b": False, "flag_c": True, "flag_d": False}],
     [{"flag_a": True, "flag_b": False, "flag_c": True}, {"flag_a": 1, "flag_b": False, "flag_c": True, "flag_d": False}])
case("json object", {"type": "object"}, [{}, {"a": [1, 2, {"b": None}], "c": "d"}], [[], "x", 1])
case("any value", {}, [1, "a", None, [True, {"x": 1.5}]], [])


def main(out_path):
    groups = []
    for desc, schema, valid, invalid in CASES:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
        jsonschema.Draft202012Validator.check_schema(schema)
        v = jsonschema.Draft202012Validator(schema)
        tests = []
        for data, want in [(d, True) for d in valid] + [(d, False) for d in invalid]:
            got = v.is_valid(data)
            if got != want:
                raise SystemExit(f"{desc}: {json.dumps(data)} is {'valid' if got else 'invalid'}, labelled otherwise")
            tests.append({"description": ("valid " if want else "invalid ") + json.dumps(data, ensure_ascii=False)[:60],
                          "data": data, "valid": want})
        groups.append({"description": desc, "schema": schema, "tests": tests})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(groups, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{out_path}: {len(groups)} schemas, {sum(len(g['tests']) for g in groups)} instances")


if __name__ == "__main__":
    main(sys.argv[1])
