"""The typed summary: traceml/run_schema.json is what tools/gen_schema.py
makes from traceml.summary_types today; the generator maps each Python
type to the JSON Schema the table in traceml.json_schema promises; every
key a built summary holds is named by its type, and every built summary
passes the generated schema."""

import json
import os
import sys
import typing
from typing import Annotated, Any, Literal, Optional, Union

import jsonschema
import pytest

from traceml import json_schema, result, summary_types
from traceml.json_schema import Def, Schema, generate, label_is, schema, when

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:
    from typing_extensions import NotRequired, TypedDict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")


# --- the generator, type by type -------------------------------------------------

class _Inner(TypedDict):
    """An inner object."""

    n: int


class _Outer(TypedDict):
    a: int
    b: NotRequired[float]
    c: Optional[str]
    d: Literal["x"]
    e: Literal["x", "y", None]
    f: list[bool]
    g: tuple[str, dict]
    h: dict[str, int]
    i: dict[Literal["p", "q"], float]
    j: dict[int, int]
    k: Union[bool, int, None]
    m: _Inner
    o: Optional[_Inner]
    p: Any


def _props(cls) -> dict:
    return generate(cls)["properties"]


def test_each_python_type_maps_to_its_json_schema():
    got = generate(_Outer)
    assert got["type"] == "object"
    assert got["required"] == ["a", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "o", "p"]
    p = got["properties"]
    assert p["a"] == {"type": "integer"}
    assert p["b"] == {"type": "number"}
    assert p["c"] == {"type": ["string", "null"]}
    assert p["d"] == {"const": "x"}
    assert p["e"] == {"enum": ["x", "y", None]}
    assert p["f"] == {"type": "array", "items": {"type": "boolean"}}
    assert p["g"] == {"type": "array", "prefixItems": [{"type": "string"}, {"type": "object"}]}
    assert p["h"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert p["i"] == {"type": "object", "propertyNames": {"enum": ["p", "q"]},
                      "additionalProperties": {"type": "number"}}
    assert p["j"] == {"type": "object", "propertyNames": {"pattern": "^[0-9]{1,9}$"},
                      "additionalProperties": {"type": "integer"}}
    assert p["k"] == {"type": ["boolean", "integer", "null"]}
    inner = {"description": "An inner object.", "type": "object", "required": ["n"],
             "properties": {"n": {"type": "integer"}}}
    assert p["m"] == inner
    assert p["o"] == {**inner, "type": ["object", "null"]}
    assert p["p"] == {}
    assert got["$defs"] == {}


Small = Annotated[int, Schema(minimum=0, maximum=9), Def("small")]
SmallOrNull = Annotated[Optional[Small], Def("small_or_null")]


@schema("kept", when(label_is("A"), {"required": ["v"]}))
class _Kept(TypedDict):
    label: str
    v: NotRequired[Small]


class _Refs(TypedDict):
    s: Small
    t: SmallOrNull
    u: Annotated[Small, Schema(description="beside the reference")]
    w: _Kept
    x: list[_Kept]


def test_named_types_go_under_defs_once_and_are_referred_to():
    got = generate(_Refs)
    p = got["properties"]
    assert p["s"] == {"$ref": "#/$defs/small"}
    assert p["t"] == {"$ref": "#/$defs/small_or_null"}
    # Keywords beside a reference wrap it, so that a bare reference can be
    # inlined (result._inlined).
    assert p["u"] == {"anyOf": [{"$ref": "#/$defs/small"}], "description": "beside the reference"}
    assert p["w"] == {"$ref": "#/$defs/kept"} == p["x"]["items"]
    assert list(got["$defs"]) == ["small", "small_or_null", "kept"]
    assert got["$defs"]["small"] == {"type": "integer", "minimum": 0, "maximum": 9}
    assert got["$defs"]["small_or_null"] == {"anyOf": [{"$ref": "#/$defs/small"},
                                                        {"type": "null"}]}
    assert got["$defs"]["kept"]["allOf"] == [
        {"if": {"properties": {"label": {"const": "A"}}}, "then": {"required": ["v"]}}]


def test_the_generated_schema_validates_as_its_types_say():
    check = jsonschema.Draft202012Validator(generate(_Refs))
    good = {"s": 3, "t": None, "u": 9, "w": {"label": "B"}, "x": [{"label": "A", "v": 0}]}
    assert not list(check.iter_errors(good))
    for bad in ({**good, "s": 10}, {**good, "t": -1}, {**good, "w": {"label": "A"}},
                {**good, "x": [{"label": "B", "v": "0"}]}):
        assert list(check.iter_errors(bad)), bad


def test_a_name_kept_twice_and_an_unmapped_type_are_refused():
    class Twice(TypedDict):
        a: Annotated[int, Def("same")]
        b: Annotated[str, Def("same")]

    class Unmapped(TypedDict):
        a: set[int]

    class BadKey(TypedDict):
        a: dict[float, int]

    with pytest.raises(ValueError, match="same"):
        generate(Twice)
    with pytest.raises(TypeError, match="set"):
        generate(Unmapped)
    with pytest.raises(TypeError, match="dict keys"):
        generate(BadKey)


# --- the run file's schema ---------------------------------------------------------

@pytest.mark.skipif(not os.path.exists(os.path.join(TOOLS, "gen_schema.py")),
                    reason="the generator is checked in the checkout, not in a copy of tests/")
def test_run_schema_json_is_what_the_types_generate():
    sys.path.insert(0, TOOLS)
    try:
        import gen_schema
    finally:
        sys.path.remove(TOOLS)
    with open(gen_schema.OUT, encoding="utf-8") as f:
        assert f.read() == gen_schema.render(), "run tools/gen_schema.py"


def test_the_shipped_schema_is_a_draft_2020_12_schema_of_the_types():
    shipped = result.schema()
    jsonschema.Draft202012Validator.check_schema(shipped)
    again = generate(summary_types.RunFile, **summary_types.SCHEMA_HEAD)
    assert shipped == again


def _unnamed(value: Any, tp: Any, path: str = "") -> list[str]:
    """The keys of ``value`` (a built summary or part) that type ``tp``
    does not name, as dotted paths."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin is Union:
            if value is None:
                return []
            # The one member of the union that fits the value's kind.
            fits = [a for a in typing.get_args(tp) if a is not type(None)
                    and isinstance(value, dict) == json_schema._is_typeddict(
                        typing.get_args(a)[0] if typing.get_origin(a) is Annotated else a)]
            if len(fits) != 1:
                return []
            tp = fits[0]
        else:
            break
    out = []
    if json_schema._is_typeddict(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp, include_extras=True)
        for key, v in value.items():
            if key not in hints:
                out.append(f"{path}.{key}")
            else:
                out += _unnamed(v, json_schema._required_part(hints[key]), f"{path}.{key}")
    elif typing.get_origin(tp) in (list, dict) and isinstance(value, (list, dict)):
        item = typing.get_args(tp)[-1]
        for v in (value if isinstance(value, list) else value.values()):
            out += _unnamed(v, item, f"{path}[]")
    return out


def test_the_walk_finds_a_key_no_type_names():
    built = {"label": "A", "v": 1, "extra": 2}
    assert _unnamed({"w": built, "x": [built], "s": 1, "t": None, "u": 2},
                    _Refs) == [".w.extra", ".x[].extra"]


def test_every_key_a_built_summary_holds_is_named_by_its_type(corpus_summaries):
    unnamed = {}
    for name, summary in corpus_summaries:
        for key in _unnamed(summary, summary_types.Summary):
            unnamed.setdefault(key, name)
    assert unnamed == {}, "add these keys to traceml/summary_types.py"


def test_every_built_summary_passes_the_generated_schema(corpus_summaries):
    check = result._validator()
    for name, summary in corpus_summaries:
        header = json.loads(json.dumps({"format": result.FORMAT,
                                        "format_version": result.FORMAT_VERSION,
                                        "summary": summary}))
        errors = [e.message for e in check.iter_errors(header)]
        assert errors == [], name
