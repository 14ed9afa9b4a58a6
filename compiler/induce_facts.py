"""Schema induction's vocabulary (compiler/induce.py): the rules' thresholds
(docs/compiler.md, "Schema induction") and the `Constraint` every induced fact is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# -- rules (docs/compiler.md, "Schema induction") -----------------------------------------

ENUM_MIN_VALUES = 4  # fewer non-null values than this: never an enum
ENUM_MAX_DISTINCT = 16  # more distinct values than this: never an enum
LABEL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")  # label-shaped: one token, no spaces
PATTERN_MIN_VALUES = 5  # a pattern needs this many non-null values ...
PATTERN_MIN_DISTINCT = 3  # ... this many of them distinct ...
PATTERN_MAX_LEN = 64  # ... and no value longer than this (nor any whitespace in it)
FORMAT_MIN_VALUES = 3
BOUND_MIN_VALUES = 5  # minimum 0 / minLength 1 / minItems 1 need this many values
CONST_MIN_VALUES = 5
RELATION_MIN_CASES = 5
BRANCH_MAX_DISTINCT = 10  # the deciding field must be enum-like
COPIED_MIN_VALUES = 2
SUM_TOLERANCE = 0.005

# Constraint kinds that `InducedField.schema()` emits; every other kind is only reported.
SCHEMA_KINDS = frozenset({"type", "enum", "const", "pattern", "format", "non_negative", "non_empty", "unique_items"})

_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_REGEX_META = set("\\.^$*+?()[]{}|/")

JSON = Any


@dataclass(frozen=True)
class Constraint:
    """One induced fact about `field` (a dotted path: `line_items[].quantity`), with counts."""

    field: str
    kind: str
    detail: dict[str, Any]
    evidence: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "kind": self.kind, "detail": self.detail, "evidence": self.evidence}

    def line(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.evidence.items())
        return f"{self.field}: {self.kind} {_detail_text(self.kind, self.detail)} ({counts})"


def _detail_text(kind: str, d: dict[str, Any]) -> str:
    if kind == "type":
        return "|".join(d["types"] + (["null"] if d["nullable"] else []))
    if kind == "enum":
        return (
            f"{d['values']} (declared in the spec)" if d["rule"] == "declared" else f"{d['values']} ({d['rule']} rule)"
        )
    if kind == "relation":
        return f"{d['left']} {d['op']} {d['right']}"
    if kind == "null_when":
        return f"when {d['field']} in {d['values']} ({' or '.join(d['missing_as'])})"
    if kind == "unique_items":
        return "no list repeats an item"
    if kind in ("pattern", "format"):
        return str(d[kind])
    if kind == "const":
        return repr(d["value"])
    if kind in ("length", "range", "items_range"):
        return f"{d['min']}..{d['max']} observed"
    if kind == "present_with":
        return f"has a value exactly when {d['field']} has one"
    if kind == "copied":
        return f"substring of input {d['input']}"
    return ", ".join(f"{k}={v!r}" for k, v in d.items())


def _keys_in_order(objs: Any) -> list[str]:
    seen: dict[str, None] = {}
    for o in objs:
        for k in o:
            seen.setdefault(k, None)
    return list(seen)
