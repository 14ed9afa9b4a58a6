"""The offline test model's tool choices: what a `choose_tool` node answers for a gold case
(docs/compiler.md, "The offline test model").

On each visit the node calls the tools the case's gold `tools` list names, in order (those
the node offers), padded to its `min_calls` and cut at its `max_calls`, then answers
`{"tool": "done"}` while it may still ask. Each call's arguments come from the tool's
argument schema in the host's catalogue: numbers from the case's input text (the
numbers the question quotes, in order, shifted by one per call so that no call repeats an
earlier one; the expected numbers when the input has none), an enum's value that the
input names as a word (else its first value; every argument with the same enum gets the
same value, so "from" and "to" units are always of one kind), a string input for a plain
string, a blank for the rest, and only the required arguments. Zero is avoided where
another number fits (a divisor). Arguments the schema refuses drop the call, with a note.

The offline model does not run the tools: their results do not matter offline, since the
final-answer node answers the case's expected values. What it checks is the structure: a
loop that reaches its final answer, bounds that hold the gold calls, and the failure edge
a case that goes to a person takes.

`with_tool_args` fills the arguments of a script derived without the catalogue (the loop
derives the offline script before emit sees the catalogue): emit applies it to
`fakes/offline.json`."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from jsonschema import SchemaError

from runtime import PatternRefused, check_schema, compile_pattern, schema_validator

if TYPE_CHECKING:
    from compiler.plan import Plan, PlanNode
    from compiler.spec import GoldCase, Spec

OFFLINE_FAKE = "offline.json"  # the offline test model, as an emitted pack's fakes/offline.json
DONE = "done"  # the choice that ends a choose_tool loop
DEFAULT_MAX_CALLS = 3  # the runtime's default for a choose_tool node's max_calls
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[A-Za-z0-9_]+")


class ArgsLike(Protocol):
    """What the offline model reads of a catalogue entry (compiler.tools.ToolSpec meets it)."""

    @property
    def args(self) -> Mapping[str, Any]: ...


Catalogue = Mapping[str, ArgsLike]


def planned_tools(node: PlanNode, listed: Sequence[str] | None) -> list[str]:
    """The tools one visit of choose_tool `node` calls for a case whose gold `tools` are
    `listed`: those the node offers, in order, padded to `min_calls` (repeating the last,
    else the first offered) and cut at `max_calls`."""
    names = [t for t in (listed or ()) if t in node.tools]
    while len(names) < (node.min_calls or 0) and node.tools:
        names.append(names[-1] if names else node.tools[0])
    return names[: _max_calls(node)]


def visit_choices(
    node: PlanNode, case: GoldCase, listed: Sequence[str] | None, catalogue: Catalogue | None
) -> tuple[list[Any], list[str]]:
    """One visit's choices for `case`, whose gold `tools` are `listed` (the calls, then
    `done` while the node may ask again), and notes on calls it could not make."""
    calls, notes = tool_calls(planned_tools(node, listed), case, catalogue or {})
    notes = [f"choose_tool '{node.id}': {n}" for n in notes]
    return calls + ([{"tool": DONE}] if len(calls) < _max_calls(node) else []), notes


def tool_calls(names: Sequence[str], case: GoldCase, catalogue: Catalogue) -> tuple[list[dict[str, Any]], list[str]]:
    """The calls `{tool, args}` of `names` in order, with arguments for `case` from each
    tool's catalogue schema (`{}` for a tool the catalogue does not describe), and notes
    on the calls dropped because no arguments the schema accepts were found."""
    pool = _numbers(case)
    made: list[dict[str, Any]] = []
    notes: list[str] = []
    for k, name in enumerate(names):
        entry = catalogue.get(name)
        schema = dict(entry.args) if entry is not None else {}
        if not schema.get("properties"):
            made.append({"tool": name, "args": {}})
            continue
        found: dict[str, Any] | None = None
        for shift in range(max(1, len(pool))):
            candidate = _arguments(schema, case, pool, k + shift)
            if candidate is None:
                break
            found = candidate
            if {"tool": name, "args": candidate} not in made:
                break
        if found is None:
            notes.append(f"no arguments of '{name}' that its schema accepts come from the case")
            continue
        made.append({"tool": name, "args": found})
    return made, notes


def with_tool_args(script: Mapping[str, Any], plan: Plan, spec: Spec, catalogue: Catalogue) -> dict[str, Any]:
    """A copy of the offline `script` whose choose_tool calls have their arguments from
    `catalogue` (what `offline_script(plan, spec, catalogue)` gives), notes added."""
    out = copy.deepcopy(dict(script))
    notes: dict[str, str] = dict(out.get("notes") or {})
    gold = {c.id: c for c in spec.gold}
    nodes = [n for n in plan.nodes if n.kind == "choose_tool"]
    for case_id, answers in (out.get("cases") or {}).items():
        case = gold.get(case_id)
        if case is None or not isinstance(answers, dict):
            continue
        found: list[str] = []
        for node in nodes:
            if node.id in answers:
                answers[node.id] = _refill(answers[node.id], node, case, catalogue, found)
        if found:
            notes[case_id] = "; ".join([notes[case_id], *found] if case_id in notes else found)
    if notes:
        out["notes"] = notes
    return out


def collapse(calls: list[Any]) -> Any:
    """A node's scripted answers: one answer when they are all the same (the last repeats)."""
    return calls[0] if calls and all(c == calls[0] for c in calls) else calls


def _refill(answer: Any, node: PlanNode, case: GoldCase, catalogue: Catalogue, notes: list[str]) -> Any:
    items = answer if isinstance(answer, list) else [answer]
    visits: list[list[Any]] = [[]]
    for item in items:
        visits[-1].append(item)
        if not _is_call(item):
            visits.append([])
    out: list[Any] = []
    for visit in visits:
        names = [str(c["tool"]) for c in visit if _is_call(c)]
        if not names:
            out += visit
            continue
        calls, found = tool_calls(names, case, catalogue)
        notes += [f"choose_tool '{node.id}': {n}" for n in found]
        out += calls + ([{"tool": DONE}] if len(calls) < _max_calls(node) else [])
    return out


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("tool"), str) and item["tool"] != DONE


def _max_calls(node: PlanNode) -> int:
    return node.max_calls if node.max_calls is not None else DEFAULT_MAX_CALLS


def _texts(case: GoldCase) -> list[str]:
    return [v for v in case.input.values() if isinstance(v, str)]


def _numbers(case: GoldCase) -> list[int | float]:
    """The numbers the case's input holds, in order (numbers in its text, and numeric
    values); else its expected numbers."""
    out: list[int | float] = []
    for value in case.input.values():
        if isinstance(value, str):
            out += [float(m) if "." in m else int(m) for m in _NUMBER.findall(value)]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out.append(value)
    if not out:
        out = [v for v in case.expected.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    return out


def _arguments(schema: Mapping[str, Any], case: GoldCase, pool: list[int | float], at: int) -> dict[str, Any] | None:
    """The required arguments, numbers taken from `pool` from index `at` on; None when
    the schema refuses them."""
    props = schema.get("properties") or {}
    required = schema.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    args: dict[str, Any] = {}
    numbers = 0
    for name in names:
        prop = props.get(name) if isinstance(props, Mapping) else None
        prop = prop if isinstance(prop, Mapping) else {}
        value, numeric = _value(prop, case, pool, at + numbers)
        numbers += numeric
        args[name] = value
    try:
        check_schema(schema)
        return None if next(schema_validator(schema).iter_errors(args), None) is not None else args
    except SchemaError:
        return None


def _value(prop: Mapping[str, Any], case: GoldCase, pool: list[int | float], at: int) -> tuple[Any, int]:
    """One argument's value, and whether it took a number from the pool (1) or not (0)."""
    if "const" in prop:
        return prop["const"], 0
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return _named(enum, case), 0
    kind = prop.get("type")
    kinds = [kind] if isinstance(kind, str) else [k for k in kind if k != "null"] if isinstance(kind, list) else []
    first = kinds[0] if kinds else ("number" if pool and not _texts(case) else "string")
    if first in ("number", "integer"):
        return _number(prop, pool, at, first == "integer"), 1
    if first == "string":
        return _string(prop, case), 0
    return {"boolean": False, "array": [], "object": {}, "null": None}.get(first), 0


def _named(enum: list[Any], case: GoldCase) -> Any:
    """The enum value the input names first as a word (any case), else the first value."""
    spelled = {str(v).lower(): v for v in enum if isinstance(v, str | int | float) and not isinstance(v, bool)}
    for text in _texts(case):
        for word in _WORD.findall(text):
            if word.lower() in spelled:
                return spelled[word.lower()]
    return enum[0]


def _number(prop: Mapping[str, Any], pool: list[int | float], at: int, integer: bool) -> int | float:
    def fits(n: int | float) -> bool:
        if integer and n != int(n):
            return False
        lo, hi = prop.get("minimum"), prop.get("maximum")
        xlo, xhi = prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")
        return not (
            (isinstance(lo, int | float) and n < lo)
            or (isinstance(hi, int | float) and n > hi)
            or (isinstance(xlo, int | float) and n <= xlo)
            or (isinstance(xhi, int | float) and n >= xhi)
        )

    ok = [int(n) if integer else n for n in pool if fits(n)]
    ok = [n for n in ok if n != 0] or ok
    if ok:
        return ok[at % len(ok)]
    for key, step in (("minimum", 0), ("exclusiveMinimum", 1), ("maximum", 0), ("exclusiveMaximum", -1)):
        bound = prop.get(key)
        if isinstance(bound, int | float) and not isinstance(bound, bool):
            return bound + step
    return 1


def _string(prop: Mapping[str, Any], case: GoldCase) -> str:
    pattern = prop.get("pattern")
    texts = _texts(case)
    if isinstance(pattern, str):
        for text in texts:
            try:
                found = compile_pattern(pattern.removeprefix("^").removesuffix("$")).search(text)
            except PatternRefused:
                break
            if found:
                return str(found.group(0))
    return texts[0] if texts else ""
