"""Schema induction: what the gold cases say about each output field, with no model.

`induce(cases)` reads (input, expected) pairs and reports, per output field, the JSON
type(s), nullability, enums, string patterns, formats, numeric ranges and array shapes;
across fields, conditional presence (a branch candidate), relations that always hold, and
values copied verbatim from an input string (an extraction candidate). Every constraint
carries its evidence counts so an author can accept or strike it. The rules (thresholds,
what is emitted into a schema and what is only reported) are in docs/compiler.md,
"Schema induction"; the constants below are those rules.

Soundness: `InducedField.schema()` only ever holds constraints that every gold value
satisfies (tests/compiler/test_induce.py checks it with hypothesis).
"""

from __future__ import annotations

import datetime
import itertools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Constraint",
    "InducedField",
    "Induction",
    "InductionScore",
    "generalise",
    "induce",
    "score_against_grammars",
]

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


@dataclass
class InducedField:
    """What the gold values of one field (or one nested property / array item) say."""

    name: str
    cases: int  # cases (or parent values) looked at
    present: int  # of those, how many had the key (null included)
    nulls: int
    types: tuple[str, ...]  # JSON types of the non-null values, sorted; () when none seen
    constraints: list[Constraint] = field(default_factory=list)
    items: InducedField | None = None  # arrays: the items' field
    properties: dict[str, InducedField] = field(default_factory=dict)  # objects
    required: tuple[str, ...] = ()  # objects: keys present in every value

    @property
    def nullable(self) -> bool:
        return self.nulls > 0

    @property
    def always_present(self) -> bool:
        return self.present == self.cases

    def schema(self) -> dict[str, Any]:
        """A JSON-schema property every gold value of the field validates against."""
        out: dict[str, Any] = {}
        types = list(self.types) + (["null"] if self.nullable else [])
        if types:
            out["type"] = types[0] if len(types) == 1 else types
        for c in self.constraints:
            if c.kind not in SCHEMA_KINDS or c.kind == "type":
                continue
            if c.kind == "enum":
                out["enum"] = list(c.detail["values"]) + ([None] if self.nullable else [])
            elif c.kind == "const":
                if self.nullable:
                    out["enum"] = [c.detail["value"], None]
                else:
                    out["const"] = c.detail["value"]
            elif c.kind == "pattern":
                out["pattern"] = c.detail["pattern"]
            elif c.kind == "format":
                out["format"] = c.detail["format"]
            elif c.kind == "non_negative":
                out["minimum"] = 0
            elif c.kind == "non_empty":
                out["minItems" if self.types == ("array",) else "minLength"] = 1
            elif c.kind == "unique_items":
                out["uniqueItems"] = True
        if self.items is not None:
            out["items"] = self.items.schema()
        if self.properties:
            out["properties"] = {k: f.schema() for k, f in self.properties.items()}
            out["required"] = list(self.required)
        return out

    def all_constraints(self) -> list[Constraint]:
        """This field's constraints and those of its items / properties, depth first."""
        out = list(self.constraints)
        if self.items is not None:
            out += self.items.all_constraints()
        for f in self.properties.values():
            out += f.all_constraints()
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cases": self.cases,
            "present": self.present,
            "nulls": self.nulls,
            "types": list(self.types),
            "schema": self.schema(),
            "constraints": [c.to_dict() for c in self.constraints],
        }
        if self.items is not None:
            d["items"] = self.items.to_dict()
        if self.properties:
            d["properties"] = {k: f.to_dict() for k, f in self.properties.items()}
        return d


@dataclass
class Induction:
    cases: int
    fields: dict[str, InducedField]
    relations: list[Constraint]
    copied: dict[str, str]  # output field -> the input field its values are substrings of

    @property
    def branches(self) -> list[Constraint]:
        """Conditional-presence constraints (`null_when`): branch candidates."""
        return [c for f in self.fields.values() for c in f.constraints if c.kind == "null_when"]

    def constraints(self) -> list[Constraint]:
        out = [c for f in self.fields.values() for c in f.all_constraints()]
        return out + self.relations

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "fields": {k: f.to_dict() for k, f in self.fields.items()},
            "relations": [c.to_dict() for c in self.relations],
            "copied": dict(self.copied),
            "branches": [c.to_dict() for c in self.branches],
        }

    def report(self) -> list[str]:
        lines = [f"{self.cases} gold cases, {len(self.fields)} output fields"]
        for name, f in self.fields.items():
            types = "|".join(list(f.types) + (["null"] if f.nullable else [])) or "unknown"
            lines.append(f"{name}: {types}, present in {f.present}/{f.cases} cases, null in {f.nulls}")
            lines += [f"  {c.line()}" for c in f.all_constraints()]
        if self.relations:
            lines.append("relations:")
            lines += [f"  {c.line()}" for c in self.relations]
        return lines


# -- induction -------------------------------------------------------------------------------


def induce(
    cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    outputs: Sequence[str] | None = None,
    *,
    declared: Mapping[str, Sequence[Any]] | None = None,
) -> Induction:
    """Induce output schemas and cross-field facts from gold (input, expected) pairs.

    `outputs` names (and orders) the output fields; by default every key seen in an
    expected object, in first-seen order. A named field never seen gets no constraints.
    `declared` maps fields to the values their spec declares (`Spec.declared_values()`):
    such a field's enum is the declared set (rule `declared`), not an induced one. A key
    `name[]` declares the item set of a multi-label (array) field: the items' enum is
    closed the same way, and the field gets `uniqueItems` when no gold list repeats an item.
    """
    names = list(outputs) if outputs is not None else _keys_in_order(exp for _, exp in cases)
    n = len(cases)
    fields: dict[str, InducedField] = {}
    for name in names:
        present = [exp[name] for _, exp in cases if name in exp]
        fields[name] = _profile(name, n, present)
    for name in names:
        fields[name].constraints += _presence(name, names, cases)
    copied: dict[str, str] = {}
    for name in names:
        c = _copied(name, cases)
        if c is not None:
            fields[name].constraints.append(c)
            copied[name] = c.detail["input"]
    for name, values in (declared or {}).items():
        if name in fields:
            _declare(fields[name], list(values), [exp[name] for _, exp in cases if exp.get(name) is not None])
        elif name.endswith("[]") and name[:-2] in fields:
            base = name[:-2]
            _declare_items(
                fields[base], list(values), [exp[base] for _, exp in cases if isinstance(exp.get(base), list)]
            )
    return Induction(cases=n, fields=fields, relations=_relations(names, cases), copied=copied)


# What a declared value set replaces: the induced closed choice and the string shape
# facts an enum makes redundant (a declared value gold never shows may not fit them).
_DECLARED_REPLACES = frozenset({"enum", "const", "pattern", "format", "non_empty"})


def _declare(f: InducedField, values: list[Any], gold: list[Any]) -> None:
    """Close `f`'s values to the declared set; the evidence counts the declared values
    gold shows (the spec loader has checked that every gold value is declared)."""
    seen = [v for v in values if any(v == g and type(v) is type(g) for g in gold)]
    f.constraints = [c for c in f.constraints if c.kind not in _DECLARED_REPLACES]
    f.constraints.append(
        Constraint(
            f.name,
            "enum",
            {"values": values, "rule": "declared"},
            {"declared": len(values), "seen_in_gold": len(seen), "violations": 0},
        )
    )


def _declare_items(f: InducedField, values: list[Any], lists: list[list[Any]]) -> None:
    """Close the items of array field `f` to the declared item set (the spec loader has
    checked that every gold item is declared); when some gold list shows and none repeats
    an item, the lists are sets: `unique_items`."""
    if f.items is None:  # gold shows no list: the items' field is still declared
        f.items = InducedField(name=f"{f.name}[]", cases=0, present=0, nulls=0, types=())
    _declare(f.items, values, [item for v in lists for item in v if item is not None])
    f.constraints = [c for c in f.constraints if c.kind != "unique_items"]
    if lists and all(_distinct(v) for v in lists):
        f.constraints.append(
            Constraint(f.name, "unique_items", {"uniqueItems": True}, {"values": len(lists), "violations": 0})
        )


def _distinct(items: list[Any]) -> bool:
    """No two items of the list are equal as JSON Schema's uniqueItems compares them."""
    return not any(_json_equal(a, b) for i, a in enumerate(items) for b in items[:i])


def _json_equal(a: JSON, b: JSON) -> bool:
    """JSON equality: 1 equals 1.0, a boolean never equals a number, containers by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | dict) or isinstance(b, list | dict):
        return False
    return bool(a == b)


def _keys_in_order(objs: Any) -> list[str]:
    seen: dict[str, None] = {}
    for o in objs:
        for k in o:
            seen.setdefault(k, None)
    return list(seen)


def _json_type(v: JSON) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _profile(name: str, cases: int, present: list[JSON]) -> InducedField:
    values = [v for v in present if v is not None]
    raw = {_json_type(v) for v in values}
    if {"integer", "number"} <= raw:
        raw.discard("integer")  # an integer validates as a number
    types = tuple(sorted(raw))
    f = InducedField(name=name, cases=cases, present=len(present), nulls=len(present) - len(values), types=types)
    ev = {"values": len(values), "nulls": f.nulls, "violations": 0}
    if types:
        f.constraints.append(Constraint(name, "type", {"types": list(types), "nullable": f.nullable}, ev))
    if len(types) != 1:
        return f
    t = types[0]
    if t == "string":
        f.constraints += _string_constraints(name, values)
    elif t in ("integer", "number"):
        f.constraints += _numeric_constraints(name, values)
    elif t == "boolean":
        f.constraints += _const(name, values)
    elif t == "array":
        f.constraints += _array_constraints(name, values)
        items = [item for v in values for item in v]
        f.items = _profile(f"{name}[]", len(items), items)
    elif t == "object":
        keys = _keys_in_order(values)
        for k in keys:
            f.properties[k] = _profile(f"{name}.{k}", len(values), [v[k] for v in values if k in v])
        f.required = tuple(k for k in keys if all(k in v for v in values))
    return f


def _const(name: str, values: list[JSON]) -> list[Constraint]:
    if len(values) >= CONST_MIN_VALUES and all(v == values[0] for v in values):
        return [Constraint(name, "const", {"value": values[0]}, {"values": len(values), "violations": 0})]
    return []


def _enum(name: str, values: list[str]) -> Constraint | None:
    """Closed when (frequency rule) every value occurs twice or more and there are at most
    max(2, n // 3) of them, or (label rule) every value is a label-shaped token and there
    are at most n // 2 of them. Both need n >= ENUM_MIN_VALUES and <= ENUM_MAX_DISTINCT."""
    n = len(values)
    counts = Counter(values)
    k = len(counts)
    if n < ENUM_MIN_VALUES or k > ENUM_MAX_DISTINCT:
        return None
    singletons = sum(1 for c in counts.values() if c == 1)
    frequency = singletons == 0 and k <= max(2, n // 3)
    label = all(LABEL_RE.match(v) for v in counts) and k <= n // 2
    if not (frequency or label):
        return None
    ordered = [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    rule = "frequency" if frequency else "label"
    return Constraint(
        name,
        "enum",
        {"values": ordered, "rule": rule, "counts": dict(counts)},
        {"values": n, "distinct": k, "singletons": singletons, "violations": 0},
    )


def _string_constraints(name: str, values: list[str]) -> list[Constraint]:
    out: list[Constraint] = []
    n = len(values)
    distinct = len(set(values))
    lengths = [len(v) for v in values]
    out.append(Constraint(name, "length", {"min": min(lengths), "max": max(lengths)}, {"values": n, "violations": 0}))
    const = _const(name, values)
    enum = _enum(name, values) if not const else None
    out += const
    if enum is not None:
        out.append(enum)
    if n >= BOUND_MIN_VALUES and min(lengths) >= 1 and not const and enum is None:
        out.append(Constraint(name, "non_empty", {"minLength": 1}, {"values": n, "violations": 0}))
    if const or enum is not None:
        return out
    fmt = _format(values)
    if fmt is not None and n >= FORMAT_MIN_VALUES:
        out.append(Constraint(name, "format", {"format": fmt}, {"values": n, "distinct": distinct, "violations": 0}))
        return out
    pattern = generalise(values)
    if pattern is not None and n >= PATTERN_MIN_VALUES and distinct >= PATTERN_MIN_DISTINCT:
        out.append(
            Constraint(name, "pattern", {"pattern": pattern}, {"values": n, "distinct": distinct, "violations": 0})
        )
    return out


def _format(values: list[str]) -> str | None:
    if all(_DATE_RE.match(v) and _is_date(v) for v in values):
        return "date"
    if all(_EMAIL_RE.match(v) for v in values):
        return "email"
    return None


def _is_date(v: str) -> bool:
    try:
        datetime.date.fromisoformat(v)
    except ValueError:
        return False
    return True


def _runs(v: str) -> list[tuple[str, str]]:
    """(class, text) runs: A = upper-case ASCII, a = lower-case ASCII, 9 = digits, and
    every other character a run of its own, class = the character itself."""
    out: list[tuple[str, str]] = []
    for ch in v:
        cls = "A" if "A" <= ch <= "Z" else "a" if "a" <= ch <= "z" else "9" if "0" <= ch <= "9" else "=" + ch
        if out and cls == out[-1][0] and cls[0] != "=":
            out[-1] = (cls, out[-1][1] + ch)
        else:
            out.append((cls, ch))
    return out


def generalise(values: Sequence[str]) -> str | None:
    """`ORD-48213`, `ORD-10001` -> `^ORD-[0-9]{5}$`: one class per run, or None.

    Every value must have the same run structure (same classes in the same order, same
    punctuation). A letter run with the same text in every value stays literal; any other
    run becomes its class with the observed length (`{5}` or `{2,4}`). Values with
    whitespace, or longer than PATTERN_MAX_LEN, give no pattern.
    """
    if not values or any(not v or len(v) > PATTERN_MAX_LEN or any(c.isspace() for c in v) for v in values):
        return None
    runs = [_runs(v) for v in values]
    shape = [c for c, _ in runs[0]]
    if any([c for c, _ in r] != shape for r in runs):
        return None
    parts = ["^"]
    for i, cls in enumerate(shape):
        texts = [r[i][1] for r in runs]
        if cls[0] == "=":
            ch = cls[1]
            parts.append("\\" + ch if ch in _REGEX_META else ch)
        elif cls in ("A", "a") and len(set(texts)) == 1:
            parts.append(texts[0])
        else:
            lo, hi = min(map(len, texts)), max(map(len, texts))
            klass = {"A": "[A-Z]", "a": "[a-z]", "9": "[0-9]"}[cls]
            parts.append(klass if lo == hi == 1 else f"{klass}{{{lo}}}" if lo == hi else f"{klass}{{{lo},{hi}}}")
    parts.append("$")
    return "".join(parts)


def _numeric_constraints(name: str, values: list[float]) -> list[Constraint]:
    n = len(values)
    out = [Constraint(name, "range", {"min": min(values), "max": max(values)}, {"values": n, "violations": 0})]
    const = _const(name, values)
    out += const
    if not const and n >= BOUND_MIN_VALUES and min(values) >= 0:
        zeros = sum(1 for v in values if v == 0)
        out.append(Constraint(name, "non_negative", {"minimum": 0}, {"values": n, "zeros": zeros, "violations": 0}))
    return out


def _array_constraints(name: str, values: list[list[JSON]]) -> list[Constraint]:
    n = len(values)
    sizes = [len(v) for v in values]
    out = [Constraint(name, "items_range", {"min": min(sizes), "max": max(sizes)}, {"values": n, "violations": 0})]
    if n >= BOUND_MIN_VALUES and min(sizes) >= 1:
        out.append(Constraint(name, "non_empty", {"minItems": 1}, {"values": n, "violations": 0}))
    return out


# -- across fields ---------------------------------------------------------------------------

_NONE = "<no value>"
_SOME = "<a value>"


def _has_value(exp: Mapping[str, Any], name: str) -> bool:
    return exp.get(name) is not None


def _presence(
    name: str, names: list[str], cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
) -> list[Constraint]:
    """`name` has no value (null or absent) exactly when field `other` takes one of a set of
    values (`<no value>` counts as a value of `other`). Reported, never emitted."""
    missing = [not _has_value(exp, name) for _, exp in cases]
    m = sum(missing)
    if m == 0 or m == len(cases):
        return []
    out: list[Constraint] = []
    for other in names:
        if other == name:
            continue
        keys = [_branch_key(exp.get(other)) for _, exp in cases]
        branchable = all(k is not None for k in keys)  # else only "has a value or not"
        by: dict[str, set[bool]] = {}
        for k, miss in zip(keys, missing, strict=True):
            by.setdefault(_SOME if k is None else k, set()).add(miss)
        if len(by) > BRANCH_MAX_DISTINCT or any(len(s) > 1 for s in by.values()):
            continue
        when = sorted(k for k, s in by.items() if True in s)
        if not branchable and when != [_NONE]:
            continue
        forms = sorted(
            {"null" if name in exp else "absent" for (_, exp), miss in zip(cases, missing, strict=True) if miss}
        )
        ev = {"cases": len(cases), "missing": m, "present": len(cases) - m, "violations": 0}
        if when == [_NONE]:
            # No value exactly when `other` has none: the two are written together.
            out.append(Constraint(name, "present_with", {"field": other, "missing_as": forms}, ev))
        else:
            out.append(Constraint(name, "null_when", {"field": other, "values": when, "missing_as": forms}, ev))
    return out


def _branch_key(v: JSON) -> str | None:
    """A string key for an enum-like value; None for a value a branch cannot test on (a
    number, list or object: only whether the field has a value counts then)."""
    if v is None:
        return _NONE
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return None


def _relations(names: list[str], cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[Constraint]:
    out: list[Constraint] = []
    exps = [exp for _, exp in cases]

    def num(exp: Mapping[str, Any], k: str) -> bool:
        v = exp.get(k)
        return isinstance(v, int | float) and not isinstance(v, bool)

    for a, b in itertools.permutations(names, 2):
        both = [e for e in exps if num(e, a) and num(e, b)]
        if len(both) >= RELATION_MIN_CASES:
            equal = sum(1 for e in both if e[a] == e[b])
            if equal == len(both):
                if a < b:
                    out.append(_rel(a, "==", b, len(both), equal))
            elif all(e[a] <= e[b] for e in both):
                out.append(_rel(a, "<=", b, len(both), equal))
        strs = [e for e in exps if isinstance(e.get(a), str) and isinstance(e.get(b), str)]
        if len(strs) >= RELATION_MIN_CASES:
            if all(e[a] == e[b] for e in strs):
                if a < b:
                    out.append(_rel(a, "==", b, len(strs), len(strs)))
            elif all(e[a] in e[b] for e in strs):
                out.append(_rel(a, "in", b, len(strs), 0))
    nums = [k for k in names if any(num(e, k) for e in exps)]
    for a, b in itertools.combinations(nums, 2):
        for c in nums:
            if c in (a, b):
                continue
            rows = [e for e in exps if num(e, a) and num(e, b) and num(e, c)]
            if len(rows) >= RELATION_MIN_CASES and all(abs(e[a] + e[b] - e[c]) <= SUM_TOLERANCE for e in rows):
                out.append(
                    Constraint(
                        c,
                        "relation",
                        {"left": f"{a} + {b}", "op": "==", "right": c, "tolerance": SUM_TOLERANCE},
                        {"cases": len(rows), "violations": 0},
                    )
                )
    return out


def _rel(a: str, op: str, b: str, n: int, equal: int) -> Constraint:
    return Constraint(a, "relation", {"left": a, "op": op, "right": b}, {"cases": n, "equal": equal, "violations": 0})


def _copied(name: str, cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> Constraint | None:
    """Every non-null string value of `name` is a substring of the same input string field."""
    rows = [(inp, exp[name]) for inp, exp in cases if exp.get(name) is not None]
    if len(rows) < COPIED_MIN_VALUES or not all(isinstance(v, str) and v for _, v in rows):
        return None
    inputs = _keys_in_order(inp for inp, _ in rows)
    for key in inputs:
        if all(isinstance(inp.get(key), str) and v in inp[key] for inp, v in rows):
            return Constraint(
                name, "copied", {"input": key}, {"values": len(rows), "copied": len(rows), "violations": 0}
            )
    return None


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


# -- induction quality against hand-written grammars -----------------------------------------


@dataclass(frozen=True)
class InductionScore:
    """Precision / recall of induced facts against hand-written grammars, per kind.

    A fact is (kind, field path, value): ("type", "order_id", "null|string"),
    ("enum", "intent", ""), ("pattern", "order_id", ""). Only fields that occur in both
    the grammars and the gold cases count (a grammar field no gold case sets cannot be
    induced; `unseen` lists them).
    """

    kinds: dict[str, dict[str, int]]  # kind -> {"induced", "hand", "matched"}
    enum_values: dict[str, int]  # {"hand", "induced", "matched"}: values of matched enums
    unseen: tuple[str, ...]
    mismatches: tuple[str, ...]

    def precision(self, kind: str) -> float | None:
        k = self.kinds[kind]
        return k["matched"] / k["induced"] if k["induced"] else None

    def recall(self, kind: str) -> float | None:
        k = self.kinds[kind]
        return k["matched"] / k["hand"] if k["hand"] else None


SCORED_KINDS = ("type", "enum", "pattern")


def _schema_facts(path: str, s: Mapping[str, Any], out: dict[tuple[str, str], str]) -> None:
    t = s.get("type")
    types = [t] if isinstance(t, str) else list(t or [])
    if types and path:
        out[("type", path)] = "|".join(sorted(types))
    if "enum" in s and path:
        out[("enum", path)] = "|".join(sorted(str(v) for v in s["enum"] if v is not None))
    if "pattern" in s:
        out[("pattern", path)] = str(s["pattern"])
    for k, sub in (s.get("properties") or {}).items():
        _schema_facts(f"{path}.{k}" if path else k, sub, out)
    if isinstance(s.get("items"), Mapping):
        _schema_facts(f"{path}[]", s["items"], out)


def score_against_grammars(induction: Induction, grammars: Sequence[Mapping[str, Any]]) -> InductionScore:
    hand: dict[tuple[str, str], str] = {}
    for g in grammars:
        _schema_facts("", g, hand)
    induced: dict[tuple[str, str], str] = {}
    for name, f in induction.fields.items():
        if f.present:
            _schema_facts(name, f.schema(), induced)
    hand_paths = {p for _, p in hand}
    induced_paths = {p for k, p in induced if k == "type"}
    both = hand_paths & induced_paths
    kinds = {k: {"induced": 0, "hand": 0, "matched": 0} for k in SCORED_KINDS}
    mismatches: list[str] = []
    values = {"hand": 0, "induced": 0, "matched": 0}
    for kind, path in sorted(induced):
        if path in both and kind in kinds:
            kinds[kind]["induced"] += 1
    for (kind, path), v in sorted(hand.items()):
        if path not in both or kind not in kinds:
            continue
        kinds[kind]["hand"] += 1
        got = induced.get((kind, path))
        matched = got is not None if kind != "type" else got == v
        if matched:
            kinds[kind]["matched"] += 1
        else:
            mismatches.append(f"{kind} {path}: hand {v!r}, induced {got!r}")
        if kind == "enum" and got is not None:
            hv, iv = set(v.split("|")), set(got.split("|"))
            values["hand"] += len(hv)
            values["induced"] += len(iv)
            values["matched"] += len(hv & iv)
    for (kind, path), v in sorted(induced.items()):
        if path in both and kind in kinds and (kind, path) not in hand:
            mismatches.append(f"{kind} {path}: induced {v!r}, not in the hand grammar")
    unseen = tuple(sorted(hand_paths - induced_paths))
    return InductionScore(kinds=kinds, enum_values=values, unseen=unseen, mismatches=tuple(mismatches))
