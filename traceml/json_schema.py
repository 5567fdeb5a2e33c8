"""JSON Schema (Draft 2020-12) from Python types: how the run file's schema
(``traceml/run_schema.json``) is made from the summary's types
(:mod:`traceml.summary_types`), not kept by hand.

The types are plain ``typing`` ones, read with ``typing.get_type_hints``:

========================================  ==================================
Python                                    JSON Schema
========================================  ==================================
``int``, ``float``, ``str``, ``bool``     ``integer``, ``number``, ``string``,
                                          ``boolean``
``None``                                  ``null``
``Optional[X]``                           ``X`` or ``null`` (a type list when
                                          ``X`` is a bare type, else anyOf)
``Union[X, Y]``                           anyOf (a type list of bare types)
``Literal[a]``, ``Literal[a, b]``         ``const``, ``enum``
``list[X]``                               array of ``items`` X
``tuple[X, Y]``                           array of ``prefixItems`` X, Y
``dict``, ``dict[K, X]``                  object; ``additionalProperties`` X,
                                          ``propertyNames`` when K is a
                                          Literal (its values) or ``int``
                                          (decimal digits: ids kept as
                                          JSON keys)
a ``TypedDict``                           object of its ``properties``; its
                                          required keys ``required``; its
                                          docstring the ``description``
``Annotated[X, Schema(**kw)]``            X with the keywords ``kw`` added
``Annotated[X, Def(name)]``               ``{"$ref": "#/$defs/name"}``, X
                                          under ``$defs``
``Any``                                   ``{}`` (anything)
========================================  ==================================

A TypedDict decorated ``@schema(name, **kw)`` is kept under ``$defs`` by
``name`` (``None``: inline) with the keywords ``kw`` (conditions such as
``allOf``) added.  Keys a TypedDict does not name stay allowed, as the file
format promises (a reader ignores them).
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Literal, Optional, Union

__all__ = ["Def", "Schema", "generate", "label_is", "schema", "when"]

_BARE = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}


class Schema:
    """JSON Schema keywords a type carries:
    ``Annotated[float, Schema(minimum=0)]``."""

    def __init__(self, **keywords: Any):
        self.keywords = keywords

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.keywords!r})"


class Def:
    """Keep the annotated type under ``$defs`` by ``name`` and refer to it:
    ``Count = Annotated[int, Schema(minimum=0), Def("count")]``."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Def({self.name!r})"


def schema(name: Optional[str] = None, *conditions: dict, **keywords: Any):
    """Class decorator for a TypedDict: keep it under ``$defs`` by ``name``
    (None: written inline where it is used), its ``conditions``
    (:func:`when`) under ``allOf``, and add ``keywords`` to its schema."""
    def mark(cls):
        cls.__json_def__ = name
        cls.__json_keywords__ = {**({"allOf": list(conditions)} if conditions else {}),
                                 **keywords}
        return cls
    return mark


def when(condition: dict, then: dict, otherwise: Optional[dict] = None) -> dict:
    """A conditional subschema: where an object matches ``condition`` it
    must match ``then`` (else ``otherwise``, when given).  Raw JSON Schema
    fragments: the checks between keys that no one key's type says (a
    PERIODIC temporal label needs its period)."""
    out = {"if": condition, "then": then}
    if otherwise is not None:
        out["else"] = otherwise
    return out


def label_is(value: str, key: str = "label") -> dict:
    """The condition "``key`` is ``value``" for :func:`when`."""
    return {"properties": {key: {"const": value}}}


def generate(root: type, **top: Any) -> dict:
    """The JSON Schema of TypedDict ``root``, its named parts under
    ``$defs`` in the order first met, with the keywords ``top`` (``$schema``,
    ``$id``, ``title``, ...) first.  Raises TypeError for a type this module
    does not map (the table above) and ValueError for two types kept under
    one name."""
    defs: dict[str, dict] = {}
    body = _Walk(defs).of_object(root)
    return {**top, **body, "$defs": defs}


class _Walk:
    """One generation: the definitions made so far (``defs``, by name) and
    the type each was made from (``made``)."""

    def __init__(self, defs: dict):
        self.defs = defs
        self.made: dict[str, object] = {}

    def keep(self, name: str, of: object, make) -> dict:
        """``{"$ref": ...}`` to ``name``, made once by ``make()``."""
        if name in self.made:
            if self.made[name] != of:
                raise ValueError(f"two types are kept under $defs/{name}: "
                                 f"{self.made[name]!r} and {of!r}")
        else:
            self.made[name] = of
            self.defs[name] = None          # keeps first-met order
            self.defs[name] = make()
        return {"$ref": f"#/$defs/{name}"}

    def of_type(self, tp: Any) -> dict:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            # Annotated[Annotated[X, a, Def(n)], b] flattens to
            # Annotated[X, a, Def(n), b]: what precedes the last Def makes
            # the definition, what follows it sits beside the reference.
            inner, *metas = typing.get_args(tp)
            at = max((i for i, m in enumerate(metas) if isinstance(m, Def)), default=None)
            if at is None:
                return {**self.of_type(inner), **_keywords(metas)}
            ref = self.keep(metas[at].name, (inner, *metas[:at + 1]),
                            lambda: {**self.of_type(inner), **_keywords(metas[:at])})
            beside = _keywords(metas[at + 1:])
            # A reference with keywords beside it is wrapped, so that each
            # bare {"$ref": ...} can be inlined (result._inlined).
            return {"anyOf": [ref], **beside} if beside else ref
        if tp is Any:
            return {}
        if tp in _BARE:
            return {"type": _BARE[tp]}
        if tp is dict:
            return {"type": "object"}
        if tp is list:
            return {"type": "array"}
        if _is_typeddict(tp):
            name = getattr(tp, "__json_def__", None)
            if name:
                return self.keep(name, tp, lambda: self.of_object(tp))
            return self.of_object(tp)
        if origin is Literal:
            values = list(typing.get_args(tp))
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin in (Union, types.UnionType):
            return self.union(typing.get_args(tp))
        if origin is list:
            (item,) = typing.get_args(tp)
            return {"type": "array", "items": self.of_type(item)}
        if origin is tuple:
            return {"type": "array", "prefixItems": [self.of_type(a) for a in typing.get_args(tp)]}
        if origin is dict:
            key, value = typing.get_args(tp)
            out: dict = {"type": "object"}
            if typing.get_origin(key) is Literal:
                out["propertyNames"] = {"enum": list(typing.get_args(key))}
            elif key is int:
                # Keyed by an id (a worker's) in memory; JSON keys are its
                # decimal digits.
                out["propertyNames"] = {"pattern": "^[0-9]{1,9}$"}
            elif key is not str:
                raise TypeError(f"dict keys must be str or a Literal, not {key!r}")
            out["additionalProperties"] = self.of_type(value)
            return out
        raise TypeError(f"no JSON Schema for {tp!r}")

    def union(self, args: tuple) -> dict:
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        parts = [self.of_type(a) for a in rest]
        # Bare types (no other keyword but object/array details) join in one
        # type list: {"type": ["number", "null"], ...}.
        if len(parts) == 1 and isinstance(parts[0].get("type"), str):
            return {**parts[0], "type": [parts[0]["type"], "null"]} if nullable else parts[0]
        if parts and all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            return {"type": [p["type"] for p in parts] + (["null"] if nullable else [])}
        return {"anyOf": parts + ([{"type": "null"}] if nullable else [])}

    def of_object(self, cls: type) -> dict:
        hints = typing.get_type_hints(cls, include_extras=True)
        out: dict = {}
        doc = inspect.cleandoc(cls.__doc__) if cls.__doc__ else None
        if doc:
            out["description"] = " ".join(doc.split())
        out["type"] = "object"
        required = [k for k in hints if k in cls.__required_keys__]
        if required:
            out["required"] = required
        out["properties"] = {k: self.of_type(_required_part(v)) for k, v in hints.items()}
        out.update(getattr(cls, "__json_keywords__", {}))
        return out


def _keywords(metas: list) -> dict:
    """The keywords of the Schema markers among ``metas``, later ones
    winning."""
    out: dict = {}
    for meta in metas:
        if isinstance(meta, Schema):
            out.update(meta.keywords)
    return out


def _required_part(tp: Any) -> Any:
    """``X`` of ``NotRequired[X]`` or ``Required[X]`` (get_type_hints keeps
    them with include_extras)."""
    origin = typing.get_origin(tp)
    if origin is not None and getattr(origin, "_name", None) in ("NotRequired", "Required"):
        return typing.get_args(tp)[0]
    return tp


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")
