"""The plan document's JSON schema (`PLAN_SCHEMA`) and what goes with it: the node kinds,
which keys each kind uses, and how a schema error is said (its JSON path, its message).

`PLAN_SCHEMA` is written so a small model can follow it as a grammar: flat objects,
optional keys, `additionalProperties: false` everywhere, no `oneOf`/`anyOf` (a nullable
key is `"type": [..., "null"]`). What a schema cannot say without `oneOf` (one target per
edge, keys that belong to one kind) is checked by `compiler.plan_check`.
docs/compiler.md, "The plan", holds a copy (tests/compiler/test_plan.py keeps it equal)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from runtime import COMPARES, check_schema, schema_validator

NODE_KINDS = ("generate", "tool", "choose_tool", "assert", "human", "end")
MAX_CALLS = 20  # the runtime's bound on a choose_tool node's max_calls
_NAME = "^[a-z][a-z0-9_]*$"
_FIELD = "^[A-Za-z_][A-Za-z0-9_]*$"
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1}}

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Packforge plan",
    "type": "object",
    "required": ["name", "entry", "nodes", "edges"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": _NAME},
        "summary": {"type": "string"},
        "entry": {"type": "string", "pattern": _NAME},
        "state": {
            "type": "object",
            "propertyNames": {"pattern": _FIELD},
            "additionalProperties": {"type": "object"},
        },
        "fields": {
            "type": "object",
            "propertyNames": {"pattern": _FIELD},
            "additionalProperties": {
                "type": "object",
                "required": ["compare"],
                "additionalProperties": False,
                "properties": {
                    "compare": {"type": "string", "enum": list(COMPARES)},
                    "tolerance": {"type": "number", "minimum": 0},
                },
            },
        },
        "nodes": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "kind"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": _NAME},
                    "kind": {"type": "string", "enum": list(NODE_KINDS)},
                    "description": {"type": "string"},
                    "reads": _STRINGS,
                    "writes": {"type": "array", "items": {"type": "string", "pattern": _FIELD}},
                    "instructions": {"type": "string"},
                    "two_stage": {"type": "boolean"},
                    "samples": {"type": "integer", "minimum": 1, "maximum": 15},
                    "agree": {"type": ["integer", "null"], "minimum": 1, "maximum": 15},
                    "confidence": {
                        "type": ["object", "null"],
                        "required": ["field", "min"],
                        "additionalProperties": False,
                        "properties": {
                            "field": {"type": "string"},
                            "min": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                        },
                    },
                    "assert": {"type": ["string", "null"]},
                    "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": 32768},
                    "tool": {"type": "string"},
                    "args": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
                    "tools": _STRINGS,
                    "max_calls": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_CALLS},
                    "min_calls": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_CALLS},
                    "to": {"type": ["string", "null"]},
                    "expr": {"type": "string"},
                    "output": {"type": "array", "items": {"type": "string", "pattern": _FIELD}},
                },
            },
        },
        "edges": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["from"],
                "additionalProperties": False,
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "when": {"type": "string"},
                    "on_fail": {"type": "string"},
                    "on_unsure": {"type": "string"},
                },
            },
        },
    },
}

# Keys that mean something only on some kinds; set on another kind they are a mistake
# (a null, false, empty or default value counts as not set).
KIND_KEYS: dict[str, frozenset[str]] = {
    "instructions": frozenset({"generate", "choose_tool", "human"}),
    "two_stage": frozenset({"generate"}),
    "samples": frozenset({"generate"}),
    "agree": frozenset({"generate"}),
    "confidence": frozenset({"generate"}),
    "assert": frozenset({"generate"}),
    "max_tokens": frozenset({"generate", "choose_tool"}),
    "tool": frozenset({"tool"}),
    "args": frozenset({"tool"}),
    "tools": frozenset({"choose_tool"}),
    "max_calls": frozenset({"choose_tool"}),
    "min_calls": frozenset({"choose_tool"}),
    "to": frozenset({"choose_tool"}),
    "expr": frozenset({"assert"}),
    "output": frozenset({"end"}),
    "writes": frozenset({"generate", "tool", "choose_tool", "human"}),
}
DEFAULTS: dict[str, Any] = {"samples": 1, "max_calls": 3, "min_calls": 0}

_VALIDATOR: jsonschema.protocols.Validator | None = None


def validator() -> jsonschema.protocols.Validator:
    """PLAN_SCHEMA's validator (checked and built once)."""
    global _VALIDATOR
    if _VALIDATOR is None:
        check_schema(PLAN_SCHEMA)
        _VALIDATOR = schema_validator(PLAN_SCHEMA)
    return _VALIDATOR


def json_path(parts: Sequence[str | int] | Any) -> str:
    """A schema error's place as the problems name it: `nodes[2].writes[1]`, `$`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "$"


def message(error: jsonschema.ValidationError) -> str:
    """A schema error in words: an unknown key with the keys there are, an enum's values."""
    if (
        error.validator == "additionalProperties"
        and isinstance(error.instance, dict)
        and isinstance(error.schema, Mapping)
    ):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra and allowed:
            return f"unknown key {', '.join(repr(k) for k in extra)}; the keys are {', '.join(sorted(allowed))}"
    if error.validator == "required":
        return str(error.message)
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return f"{error.instance!r} is not one of {', '.join(str(v) for v in error.validator_value)}"
    if error.validator == "pattern":
        return f"{error.instance!r} must match {error.validator_value} (lowercase letters, digits, _)"
    return str(error.message)


def is_set(key: str, value: Any) -> bool:
    """Whether a node key counts as set: not null, false, empty or its default."""
    if value is None or value is False or value in ((), [], {}, ""):
        return False
    return not (key in DEFAULTS and value == DEFAULTS[key])
