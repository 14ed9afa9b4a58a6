"""The plan document: the graph a planner proposes, before it becomes a pack.

A plan is JSON. `PLAN_SCHEMA` (compiler.plan_schema) is its JSON schema, written so a
small model can follow it as a grammar: flat objects, optional keys, no `oneOf`.
`parse_plan` checks a document against the schema and then against itself and the spec
(compiler.plan_check: unique ids, known nodes, spec outputs and tools, expressions that
compile, reads that something provides), reporting every problem at once, each starting
with its JSON path (`nodes[2].writes: ...`).

A plan that parses is not guaranteed to become a pack that loads: the runtime's loader
is the judge (`compiler.emit.emit` + `runtime.load_pack`). docs/compiler.md, "The plan",
is the reference."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.errors import PlanInvalid
from compiler.plan_check import Checker
from compiler.plan_schema import NODE_KINDS, PLAN_SCHEMA, json_path, message, validator

if TYPE_CHECKING:
    from compiler.spec import Spec

__all__ = ["NODE_KINDS", "PLAN_SCHEMA", "Plan", "PlanEdge", "PlanNode", "all_of", "parse_plan"]


@dataclass(frozen=True)
class PlanNode:
    """One node of a plan. Keys a node's kind does not use keep their defaults."""

    id: str
    kind: str
    description: str = ""
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    instructions: str = ""
    two_stage: bool = False
    samples: int = 1
    agree: int | None = None
    confidence: dict[str, Any] | None = None
    assert_: str | None = None
    max_tokens: int | None = None
    tool: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()  # choose_tool: the tools offered, in order
    max_calls: int | None = None  # choose_tool: None is the runtime's default (3)
    min_calls: int | None = None  # choose_tool: None is the runtime's default (0)
    to: str | None = None  # choose_tool: the final-answer node (its `to` key, else its `to` edge)
    expr: str | None = None
    output: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PlanEdge:
    """One edge: `source` -> `to` (optionally `when`), or `on_fail` / `on_unsure`."""

    source: str
    to: str | None = None
    when: str | None = None
    on_fail: str | None = None
    on_unsure: str | None = None

    @property
    def target(self) -> str:
        """The node this edge leads to, whatever its form."""
        return self.to or self.on_fail or self.on_unsure or ""


@dataclass(frozen=True)
class Plan:
    """A parsed, checked plan. Build with `parse_plan`; `document` is the validated JSON."""

    name: str
    summary: str
    entry: str
    state: dict[str, Any]
    nodes: tuple[PlanNode, ...]
    edges: tuple[PlanEdge, ...]
    document: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)

    def node(self, node_id: str) -> PlanNode:
        """The node with id `node_id`; KeyError when there is none."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def outgoing(self, node_id: str) -> tuple[PlanEdge, ...]:
        """The edges leaving `node_id`, in document order."""
        return tuple(e for e in self.edges if e.source == node_id)

    def to_json(self) -> str:
        """The document as JSON: keys sorted, indented, one trailing newline."""
        return json.dumps(self.document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def parse_plan(doc: Mapping[str, Any], spec: Spec | None = None) -> Plan:
    """Check the plan document `doc` (against `spec` too, when given) and build a Plan.

    Raises PlanInvalid with every problem at once, each starting with its JSON path.
    Checks: PLAN_SCHEMA; unique node ids; the entry and every edge name known nodes; an
    edge has exactly one of `to`/`on_fail`/`on_unsure`, and `when` only with `to`; keys
    only on the kinds that use them; a tool node names a tool (a spec tool, with a spec)
    and an assert node has `expr`; a choose_tool node offers tools (spec tools, with a
    spec, each once, never `done`), writes one field, has `min_calls` <= `max_calls` and
    one `to` edge, without `when`, to a generate node (the one its `to` key names); writes of generate and human nodes are spec outputs
    or `state` keys (with a spec; else `state` keys or anything); every expression
    compiles; reads (and tool args, expression references and end outputs) are
    `input.<declared input>` or fields some node writes; `agree` <= `samples`; a
    `confidence` field is one of the node's writes; a `fields` compare rule names a field
    some node writes, with a tolerance only on `number`. Shape: every node is reachable
    from the entry; every node but an end has a `to` edge and an end has none; no `to`
    edge comes after an unconditional one from the same node; at most one `on_fail` and
    one `on_unsure` per node; no `on_fail` from a human node; `on_unsure` only from a
    generate node with samples >= 2 or a confidence gate; every cycle has a `to` edge
    leaving it; a node reads (and a `when` uses) only what some path from the entry can
    have written before it, an on_fail / on_unsure edge carrying nothing of the failed
    node's writes."""
    problems: list[str] = []
    if not isinstance(doc, Mapping):
        raise PlanInvalid([f"$: a plan is a JSON object, not {type(doc).__name__}"])
    document = copy.deepcopy(dict(doc))
    for error in sorted(validator().iter_errors(document), key=lambda e: (json_path(e.absolute_path), e.message)):
        problems.append(f"{json_path(error.absolute_path)}: {message(error)}")
    Checker(document, spec, problems).run()
    if problems:
        raise PlanInvalid(_unique(problems))
    edges = tuple(
        PlanEdge(
            source=e["from"], to=e.get("to"), when=e.get("when"), on_fail=e.get("on_fail"), on_unsure=e.get("on_unsure")
        )
        for e in document["edges"]
    )
    nodes = tuple(_node(n, edges) for n in document["nodes"])
    return Plan(
        name=document["name"],
        summary=document.get("summary", ""),
        entry=document["entry"],
        state=dict(document.get("state") or {}),
        nodes=nodes,
        edges=edges,
        document=document,
        fields=copy.deepcopy(dict(document.get("fields") or {})),
    )


def _node(n: Mapping[str, Any], edges: tuple[PlanEdge, ...]) -> PlanNode:
    output = n.get("output")
    to = n.get("to") or None
    if n["kind"] == "choose_tool" and to is None:
        to = next((e.to for e in edges if e.source == n["id"] and e.to is not None), None)
    return PlanNode(
        id=n["id"],
        kind=n["kind"],
        description=n.get("description") or "",
        reads=tuple(n.get("reads") or ()),
        writes=tuple(n.get("writes") or ()),
        instructions=n.get("instructions") or "",
        two_stage=bool(n.get("two_stage", False)),
        samples=n.get("samples") or 1,
        agree=n.get("agree"),
        confidence=dict(n["confidence"]) if n.get("confidence") else None,
        assert_=n.get("assert") or None,
        max_tokens=n.get("max_tokens"),
        tool=n.get("tool"),
        args=dict(n.get("args") or {}),
        tools=tuple(n.get("tools") or ()),
        max_calls=n.get("max_calls"),
        min_calls=n.get("min_calls"),
        to=to if n["kind"] == "choose_tool" else None,
        expr=n.get("expr"),
        output=tuple(output) if output is not None else None,
    )


def _unique(problems: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for p in problems:
        seen.setdefault(p, None)
    return list(seen)


def all_of(exprs: Sequence[str]) -> str | None:
    """Expressions as one check: each on one line, joined with `and` (parenthesised
    when there are several); None for none."""
    parts = [" ".join(e.split()) for e in exprs]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " and ".join(f"({p})" for p in parts)
