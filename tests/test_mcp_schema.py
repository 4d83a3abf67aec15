"""What the model is shown of an MCP tool (issue 34): names within providers' rules, schemas they accept."""

from __future__ import annotations

import json

from odysseus.mcp.schema import description, exposed_names, sanitize, selected

LOOP = {
    "type": "object",
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "string"}}}},
    "properties": {"tree": {"$ref": "#/$defs/node"}, "self": {"$ref": "#"}, "gone": {"$ref": "#/$defs/missing"}},
    "required": ["tree", "not-a-property"],
    "additionalProperties": False,
}


def test_names_are_prefixed_cleaned_cut_to_64_and_never_collide():
    names = exposed_names(
        "hostile",
        ["echo", "odd name/with.dots ünïcode", "odd name/with.dots ünïcode!", "x" * 80, "x" * 81, "echo"],
    )
    assert names["echo"] == "mcp__hostile__echo"
    assert names["odd name/with.dots ünïcode"] == "mcp__hostile__odd_name_with_dots__n_code"
    assert names["odd name/with.dots ünïcode!"] == "mcp__hostile__odd_name_with_dots__n_code_"
    assert len(set(names.values())) == len(names) == 5
    for name in names.values():
        assert len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert names["x" * 80] == ("mcp__hostile__" + "x" * 80)[:64]
    assert names["x" * 81] == ("mcp__hostile__" + "x" * 80)[:62] + "_2"  # cut to the same name: numbered


def test_a_ref_loop_is_resolved_once_and_cut_where_it_loops():
    schema = sanitize(LOOP)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and "$schema" not in text
    tree = schema["properties"]["tree"]
    assert tree["type"] == "object" and tree["properties"]["v"] == {"type": "string"}
    assert tree["properties"]["next"] == {}  # the loop: any value
    assert schema["properties"]["self"] == {} and schema["properties"]["gone"] == {}
    assert schema["required"] == ["tree"] and schema["additionalProperties"] is False


def test_the_top_is_always_an_object_and_refused_keywords_are_dropped():
    assert sanitize(None) == {"type": "object", "properties": {}}
    assert sanitize({"type": "string"}) == {"type": "object", "properties": {}}
    odd = sanitize(
        {
            "anyOf": [{"type": "object"}, {"type": "null"}],
            "if": {"properties": {}},
            "then": {},
            "x-vendor": 1,
            "patternProperties": {"^a": {}},
            "properties": {"n": {"type": ["integer", "null"], "minimum": 0, "$comment": "c", "format": "int32"}},
        }
    )
    assert odd == {
        "type": "object",
        "properties": {"n": {"type": ["integer", "null"], "minimum": 0, "format": "int32"}},
    }


def test_a_deep_or_huge_schema_is_bounded():
    deep: dict = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    assert len(json.dumps(sanitize(deep))) < 2000
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    assert len(sanitize(wide)["properties"]) == 500


def test_allow_list_then_cap_and_the_description_names_the_server():
    tools = [{"name": f"t{i}"} for i in range(10)]
    assert [t["name"] for t in selected(tools, None, 3)] == ["t0", "t1", "t2"]
    assert [t["name"] for t in selected(tools, ["t9", "t4", "nope"], 64)] == ["t4", "t9"]
    assert [t["name"] for t in selected(tools, ["t9", "t4"], 1)] == ["t4"]
    assert description("time", "", "Get the time") == "[MCP server time] Get the time"
    assert len(description("s", "", "d" * 5000)) == 1000
