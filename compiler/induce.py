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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.induce_cross import _copied, _presence, _relations
from compiler.induce_facts import (
    _DATE_RE,
    _EMAIL_RE,
    _REGEX_META,
    BOUND_MIN_VALUES,
    CONST_MIN_VALUES,
    ENUM_MAX_DISTINCT,
    ENUM_MIN_VALUES,
    FORMAT_MIN_VALUES,
    JSON,
    LABEL_RE,
    PATTERN_MAX_LEN,
    PATTERN_MIN_DISTINCT,
    PATTERN_MIN_VALUES,
    SCHEMA_KINDS,
    Constraint,
    _keys_in_order,
)

__all__ = [
    "Constraint",
    "InducedField",
    "Induction",
    "generalise",
    "induce",
]


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
