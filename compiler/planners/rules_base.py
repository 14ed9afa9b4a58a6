"""The rules planner's parts shared by its modules: the chain node it builds, what it
reads of a field (closed choice, values, numeric, which gold cases set it) and small
helpers. docs/compiler.md, "The rules planner", says what the planner infers."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.induce import Induction
from compiler.spec import GoldCase, Spec
from compiler.tools import ToolSpec

# A tool named with one of these verbs only reads; any other tool is taken to act on the
# world (a refund, an email), so what feeds it is decided with an agreement gate.
READ_ONLY_VERBS = frozenset({"get", "lookup", "fetch", "find", "search", "read", "list", "check", "query", "load"})
# A node gold paths name with one of these words is a check (an assert node).
CHECK_WORDS = frozenset({"check", "verify", "validate", "assert", "ensure", "confirm", "guard"})
GATE_SAMPLES = 3
GATE_AGREE = 2
NODE_ID = re.compile(r"[^a-z0-9_]+")
NEXT = "\0next"
LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


@dataclass
class ChainNode:
    id: str
    kind: str  # generate | tool | choose_tool | assert
    writes: list[str] = field(default_factory=list)
    tool: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    expr: str | None = None
    asserts: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    gated: bool = False
    closed: bool = False  # a classification node (starts with a closed-choice field)
    on_fail: str | None = None
    two_stage: bool = False
    detour: tuple[str, str] | None = None  # (from, back to): a node off the chain
    tools: list[str] = field(default_factory=list)  # choose_tool: the tools offered
    max_calls: int | None = None  # choose_tool
    min_calls: int = 0  # choose_tool
    answers: bool = False  # the generate node that answers from a choose_tool node's calls


class Fields:
    """What the planner knows: the spec, its induction, the tools; what it reads of a field."""

    def __init__(self, spec: Spec, induction: Induction, catalogue: Mapping[str, ToolSpec]) -> None:
        self.spec = spec
        self.induction = induction
        self.tools = {name: catalogue.get(name) or ToolSpec(name) for name in spec.tools}
        self.unsure = spec.unsure_end
        # Cases that say where a run goes: not the unsure end's (those are partial).
        self.cases = [c for c in spec.gold if c.end is not None and c.end != self.unsure]
        self.human_answers = [c.human[self.unsure] for c in spec.gold if self.unsure and self.unsure in c.human]

    def closed(self, name: str) -> bool:
        """A closed-choice field: an induced enum or const, or a boolean."""
        f = self.induction.fields.get(name)
        if f is None:
            return False
        if f.types == ("boolean",):
            return True
        return any(c.kind in ("enum", "const") and c.field == name for c in f.constraints)

    def values(self, name: str) -> list[Any]:
        f = self.induction.fields.get(name)
        for c in f.constraints if f else []:
            if c.kind == "enum":
                return list(c.detail["values"])
            if c.kind == "const":
                return [c.detail["value"]]
        return [True, False] if f is not None and f.types == ("boolean",) else []

    def numeric(self, name: str) -> bool:
        f = self.induction.fields.get(name)
        return f is not None and bool(f.types) and set(f.types) <= {"integer", "number"}

    def presence(self, name: str) -> frozenset[str]:
        return frozenset(c.id for c in self.cases if name in c.expected)

    def field_line(self, name: str) -> str:
        f = self.spec.outputs.get(name)
        return f"{name}: {f.description}" if f else name


def leaves(case: GoldCase, node: str, end: str) -> bool:
    """The case's path shows it going from `node` straight to `end`."""
    path = list(case.path or ())
    return any(a == node and b == end for a, b in itertools.pairwise(path))


def similar(slot: str, name: str) -> int:
    """How alike a node id from gold and a field or tool name are: shared words, else a
    shared 5-letter stem (`prioritise` / `priority`)."""
    a, b = slot.lower(), name.lower()
    if a == b:
        return 3
    if set(a.split("_")) & set(b.split("_")):
        return 2
    return 1 if len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5] else 0


def count(cases: Sequence[GoldCase], end: str) -> int:
    return sum(1 for c in cases if c.end == end)


def holds(compiled: Any, expected: Mapping[str, Any]) -> bool:
    try:
        return bool(compiled.truthy(dict(expected)))
    except Exception:  # a test that cannot be evaluated does not hold (as in `when`)
        return False


def literal(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    return json.dumps(v)


def json_type_matches(wanted: Any, types: Sequence[str]) -> bool:
    want = set(wanted) if isinstance(wanted, list) else {wanted}
    have = set(types) | ({"number"} if "integer" in types else set())
    return bool(want & have)


def state_schema(values: Sequence[Any]) -> dict[str, Any]:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {str}:
        return {"type": "string"}
    if kinds and kinds <= {int, float}:
        return {"type": "number"}
    if kinds == {bool}:
        return {"type": "boolean"}
    return {}
