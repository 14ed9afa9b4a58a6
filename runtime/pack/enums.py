"""Cross-file checks on closed-choice fields: a value a grammar no longer allows, still used
by a `when:` edge or an evalset case (warnings, not load errors: `enum_problems`).

Renaming an enum value in `grammars/classify.json` used to leave "✓ The whole pack loads"
while `when: category == 'refund'` could never be true again and the evalset's cases
expecting `refund` could never pass. A field's allowed values are the union of the
`enum`s of the generate nodes that write it (the property's own `enum`, or its array's
`items.enum`); a field written by a node whose grammar does not close it (or by a tool)
is left alone, and so is an evalset value of a field compared other than `exact` or
`set` (under `loose`, `"Billing"` matches `billing`). A `choices:` node's per-call enums are a subset of its grammar's, so the
grammar is the bound."""

from __future__ import annotations

import ast
from typing import Any

from runtime.errors import PackIssue
from runtime.pack.model import Pack
from runtime.pack.yamlsrc import SourceMap, load_yaml


def closed_values(pack: Pack) -> dict[str, tuple[frozenset[str], str]]:
    """Field -> (the string values its grammar(s) allow, the grammar files that say so),
    for fields every writer of which closes them."""
    found: dict[str, tuple[set[str], list[str]]] = {}
    open_: set[str] = set()
    for node in pack.nodes.values():
        props = (node.schema or {}).get("properties", {}) if node.kind == "generate" else {}
        for field in node.writes:
            allowed = _enum(props.get(field)) if isinstance(props, dict) else None
            if allowed is None:
                open_.add(field)
                continue
            values, files = found.setdefault(field, (set(), []))
            values |= allowed
            files.append(f"grammars/{node.id}.json")
    return {f: (frozenset(v), ", ".join(sorted(files))) for f, (v, files) in found.items() if f not in open_}


def _enum(spec: Any) -> set[str] | None:
    if not isinstance(spec, dict):
        return None
    if spec.get("type") == "array" or "items" in spec:
        return _enum(spec.get("items"))
    values = spec.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return set(values)
    return None


def _shown(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))


def enum_problems(pack: Pack) -> list[PackIssue]:
    """A problem for each `when:` literal and each evalset value that a closed field's
    grammar does not allow. Not load errors: a pack that has them still runs (the edge
    is never taken, the case never passes), and a compiler attempt whose plan left a
    gold value out of its enum must be judged, not refused. `packforge validate` prints
    them as warnings; the studio's editor lists them with the pack's problems."""
    issues: list[PackIssue] = []
    graph = SourceMap("graph.yaml")
    try:  # the graph's lines, for the edges' problems (the pack loaded: it parses)
        load_yaml((pack.root / "graph.yaml").read_text(encoding="utf-8"), graph, [])
    except OSError:
        pass
    _check(pack, graph, issues)
    return issues


def _check(pack: Pack, graph: SourceMap, issues: list[PackIssue]) -> None:
    closed = closed_values(pack)
    if not closed:
        return
    for edge in pack.edges:
        if edge.when is None:
            continue
        for field, literal in _compared_literals(edge.when.source):
            if field in closed and literal not in closed[field][0]:
                allowed, files = closed[field]
                issues.append(
                    graph.issue(
                        f"edge {edge.source} -> {edge.target}: when compares {field} to '{literal}', which "
                        f"{files} does not allow ({_shown(allowed)}); the edge can never be taken",
                        "edges",
                        edge.index,
                        "when",
                        kind="reference",
                    )
                )
    for case in pack.cases:
        for field, (allowed, files) in closed.items():
            if pack.fields.get(field) is not None and pack.fields[field].compare not in ("exact", "set"):
                continue  # loose, text, a scorer: the gold value may be spelled otherwise and still match
            value = case.expected.get(field)
            items = value if isinstance(value, list) else [value]
            bad = sorted({v for v in items if isinstance(v, str) and v not in allowed})
            if bad:
                issues.append(
                    PackIssue(
                        "evalset.jsonl",
                        f"case '{case.id}': expected.{field} {', '.join(repr(b) for b in bad)} is not a value "
                        f"{files} allows ({_shown(allowed)}); the case can never pass",
                        case.line,
                        "evalset",
                    )
                )


def _compared_literals(source: str) -> list[tuple[str, str]]:
    """(field, string literal) for each `field == 'x'`, `'x' != field`, `field in ['x', ...]`
    in an expression (already compiled, so it parses)."""
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return []
    pairs: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, ast.Eq | ast.NotEq):
            for a, b in ((left, right), (right, left)):
                if isinstance(a, ast.Name) and isinstance(b, ast.Constant) and isinstance(b.value, str):
                    pairs.append((a.id, b.value))
        elif (
            isinstance(op, ast.In | ast.NotIn)
            and isinstance(left, ast.Name)
            and isinstance(right, ast.List | ast.Tuple | ast.Set)
        ):
            pairs.extend(
                (left.id, e.value) for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return pairs
