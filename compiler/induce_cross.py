"""Facts across fields (compiler/induce.py): conditional presence (branch candidates),
relations that always hold, and values copied verbatim from an input string."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from compiler.induce_facts import (
    BRANCH_MAX_DISTINCT,
    COPIED_MIN_VALUES,
    JSON,
    RELATION_MIN_CASES,
    SUM_TOLERANCE,
    Constraint,
    _keys_in_order,
)

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
