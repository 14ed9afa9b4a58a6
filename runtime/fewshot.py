"""Few-shot examples for a generate node, from a declared examples file, never the evalset.

    examples: {file: examples.jsonl, count: 3, strategy: nearest, match: [department]}

The file has the evalset's line format (`id`, `input`, `expected`). The loader refuses
an example whose id or input equals an evalset case's (`overlap_issues`), so a score is
never inflated by showing the model the answer; the one exception is a case tagged with
the manifest's `train_tag` (a declared train split: the report scores the other cases
apart, as the held-out score). Per call, `choose` picks `count`
examples: `fixed` takes the first ones in file order; `nearest` ranks them by the
Jaccard similarity of the word sets of the call's input and each example's input
(every string in the input, flattened), ties broken by file order. `match` lists
state fields the node reads and does not write (written by earlier nodes; a path like
`customer.tier` names a part of one): only examples whose expected value there equals
the run's, compared as canonical JSON, are candidates, so a sub-issue node is shown
examples of the department already chosen; fewer than `count` are shown when fewer
match. All of this is deterministic: the same input and state always get the same
examples. A case is never its own few-shot example: an example whose input equals the
call's (canonical JSON) is skipped, so a train-tagged case run on its own line is not
shown its answer."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from runtime.errors import PackIssue
from runtime.templates import lookup

STRATEGIES = ("fixed", "nearest")
LINE_KEYS = frozenset({"id", "input", "expected", "path", "end", "tags", "human", "note"})
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Example:
    """One line of an examples file."""

    id: str
    input: dict[str, Any]
    expected: dict[str, Any]
    line: int
    words: frozenset[str] = field(default=frozenset(), compare=False)

    @cached_property
    def key(self) -> str:
        """The input as canonical JSON (what `choose` compares with the call's input)."""
        return canonical(self.input)


@dataclass(frozen=True)
class Examples:
    """`examples: {file, count, strategy, match}` on a generate node, with the file loaded."""

    file: str
    count: int
    strategy: str  # fixed | nearest
    items: tuple[Example, ...]
    match: tuple[str, ...] = ()  # state fields an example's expected values must equal


class GoldCase(Protocol):
    """What the overlap check needs of an evalset case (runtime.pack.model.Case)."""

    @property
    def id(self) -> str: ...
    @property
    def input(self) -> dict[str, Any]: ...
    @property
    def line(self) -> int: ...
    @property
    def tags(self) -> tuple[str, ...]: ...


def words(value: Any) -> frozenset[str]:
    """The lower-cased words of every string inside `value` (dict values, list items)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.update(_WORD.findall(item.lower()))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return frozenset(found)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def similarity(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """How alike two inputs are as `strategy: nearest` ranks examples: the Jaccard index
    of their word sets (the compiler's no-model `nearest` arm ranks gold cases by it)."""
    return jaccard(words(dict(a)), words(dict(b)))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def choose(
    examples: Examples,
    input_: Mapping[str, Any],
    own: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
) -> list[Example]:
    """The examples to show for a call on `input_`, in the order they are shown: for
    `nearest`, the most similar comes last, next to the question. Never an example whose
    input is the call's own: `input_`, or `own` (the input before truncation, when the
    call shows a cut one), compared as canonical JSON. With `match`, only examples whose
    expected values at those paths equal `state`'s (a path missing from the state
    matches no example)."""
    mine = {canonical(dict(input_))} | ({canonical(dict(own))} if own is not None else set())
    items = [e for e in examples.items if e.key not in mine]
    if examples.match:
        wanted = [at(state or {}, f) for f in examples.match]
        if any(w is None for w in wanted):
            return []
        items = [e for e in items if [at(e.expected, f) for f in examples.match] == wanted]
    if examples.strategy == "fixed":
        return items[: examples.count]
    query = words(dict(input_))
    ranked = sorted(range(len(items)), key=lambda i: (-jaccard(query, items[i].words), i))[: examples.count]
    return [items[i] for i in reversed(ranked)]


_MISSING = object()  # `at`: a path the values do not have, apart from a JSON null


def at(values: Mapping[str, Any], path: str) -> str | None:
    """The value at the field path `path` ('a.b': key b of field a) as canonical JSON,
    so `true` never equals `1` and key order does not count; None when it is missing."""
    value = lookup(values, tuple(path.split(".")), missing=_MISSING)
    return None if value is _MISSING else canonical(value)


def overlap_issues(examples: Examples, cases: Sequence[GoldCase], train_tag: str | None = None) -> list[PackIssue]:
    """An issue for every example whose id or input equals an evalset case's, except a
    case tagged `train_tag` (the declared train split)."""
    cases = [c for c in cases if train_tag is None or train_tag not in c.tags]
    by_id = {c.id: c for c in cases}
    by_input = {canonical(c.input): c for c in reversed(cases)}
    found: list[PackIssue] = []
    for ex in examples.items:
        same_id = by_id.get(ex.id)
        same_input = by_input.get(ex.key)
        for what, case in (("id", same_id), ("input", same_input)):
            if case is not None:
                found.append(
                    PackIssue(
                        examples.file,
                        f"example '{ex.id}' has the same {what} as evalset case '{case.id}' (evalset.jsonl line "
                        f"{case.line}); few-shot examples must not come from the evalset: remove or change it",
                        ex.line,
                        "evalset",
                    )
                )
                break
    return found


def parse_examples(
    text: str,
    rel: str,
    node_id: str,
    writes: Sequence[str],
    issues: list[PackIssue],
    reads: Sequence[str] = (),
) -> list[Example]:
    """The examples in `text` (the pack file `rel`); each bad line is an issue naming it.
    An example must hold every field the node writes (its answer) and every state field
    the node reads (its prompt is rendered on the example's expected values as state)."""
    state_reads = sorted({r.split(".", 1)[0] for r in reads if not r.startswith("input.")} - set(writes))
    items: list[Example] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        problem = None
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            body = None
            problem = "not valid JSON; each line must be one object {id, input, expected}"
        if problem is None and not isinstance(body, dict):
            problem = "each line must be a JSON object {id, input, expected}"
        if problem is None:
            assert isinstance(body, dict)
            unknown = sorted(set(body) - LINE_KEYS)
            example_id, inp, expected = body.get("id", f"line-{lineno}"), body.get("input"), body.get("expected")
            if unknown:
                problem = f"unknown key '{unknown[0]}'; each line has id, input and expected"
            elif not isinstance(example_id, str) or not example_id:
                problem = "'id' must be a non-empty string"
            elif not isinstance(inp, dict) or not isinstance(expected, dict):
                problem = "'input' and 'expected' are required and must be JSON objects"
            elif missing := [w for w in writes if w not in expected]:
                problem = f"example '{example_id}' has no expected {', '.join(missing)} (node '{node_id}' writes it)"
            elif missing := [r for r in state_reads if r not in expected]:
                problem = (
                    f"example '{example_id}' has no expected {', '.join(missing)}: node '{node_id}' reads it, "
                    "and its prompt is rendered on the example's expected values"
                )
            elif example_id in seen:
                problem = f"duplicate example id '{example_id}' (first on line {seen[example_id]})"
            else:
                seen[example_id] = lineno
                items.append(Example(example_id, inp, expected, lineno, words(inp)))
        if problem is not None:
            issues.append(PackIssue(rel, problem, lineno, "value"))
    return items
