"""The plan document: the graph a planner proposes, before it becomes a pack.

A plan is JSON. `PLAN_SCHEMA` is its JSON schema, written so a small model can follow it
as a grammar: flat objects, optional keys, no `oneOf`. `parse_plan` checks a document
against the schema and then against itself and the spec (unique ids, known nodes, spec
outputs and tools, expressions that compile, reads that something provides), reporting
every problem at once, each starting with its JSON path (`nodes[2].writes: ...`).

A plan that parses is not guaranteed to become a pack that loads: the runtime's loader
is the judge (`compiler.emit.emit` + `runtime.load_pack`). docs/compiler.md, "The plan",
is the reference."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

from compiler.errors import PlanInvalid
from runtime import COMPARES, ExprError, compile_expr

if TYPE_CHECKING:
    from compiler.spec import Spec

NODE_KINDS = ("generate", "tool", "assert", "human", "end")
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
_KIND_KEYS: dict[str, frozenset[str]] = {
    "instructions": frozenset({"generate", "human"}),
    "two_stage": frozenset({"generate"}),
    "samples": frozenset({"generate"}),
    "agree": frozenset({"generate"}),
    "confidence": frozenset({"generate"}),
    "assert": frozenset({"generate"}),
    "max_tokens": frozenset({"generate"}),
    "tool": frozenset({"tool"}),
    "args": frozenset({"tool"}),
    "expr": frozenset({"assert"}),
    "output": frozenset({"end"}),
    "writes": frozenset({"generate", "tool", "human"}),
}
_DEFAULTS: dict[str, Any] = {"samples": 1}


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
    and an assert node has `expr`; writes of generate and human nodes are spec outputs
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
    for error in sorted(_validator().iter_errors(document), key=lambda e: (_path(e.absolute_path), e.message)):
        problems.append(f"{_path(error.absolute_path)}: {_message(error)}")
    _Checker(document, spec, problems).run()
    if problems:
        raise PlanInvalid(_unique(problems))
    nodes = tuple(_node(n) for n in document["nodes"])
    edges = tuple(
        PlanEdge(
            source=e["from"], to=e.get("to"), when=e.get("when"), on_fail=e.get("on_fail"), on_unsure=e.get("on_unsure")
        )
        for e in document["edges"]
    )
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


def _node(n: Mapping[str, Any]) -> PlanNode:
    output = n.get("output")
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
        expr=n.get("expr"),
        output=tuple(output) if output is not None else None,
    )


_VALIDATOR: jsonschema.protocols.Validator | None = None


def _validator() -> jsonschema.protocols.Validator:
    global _VALIDATOR
    if _VALIDATOR is None:
        cls = jsonschema.validators.validator_for(PLAN_SCHEMA)
        cls.check_schema(PLAN_SCHEMA)
        _VALIDATOR = cls(PLAN_SCHEMA)
    return _VALIDATOR


def _path(parts: Sequence[str | int] | Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "$"


def _message(error: jsonschema.ValidationError) -> str:
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


def _unique(problems: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for p in problems:
        seen.setdefault(p, None)
    return list(seen)


def _is_set(key: str, value: Any) -> bool:
    if value is None or value is False or value in ((), [], {}, ""):
        return False
    return not (key in _DEFAULTS and value == _DEFAULTS[key])


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class _Checker:
    """The checks past the schema. Tolerant of ill-typed parts (the schema has already
    reported them): it checks what it can read."""

    def __init__(self, doc: dict[str, Any], spec: Spec | None, problems: list[str]) -> None:
        self.doc = doc
        self.spec = spec
        self.problems = problems
        raw = doc.get("nodes")
        self.nodes: list[tuple[int, dict[str, Any]]] = [
            (i, n) for i, n in enumerate(raw if isinstance(raw, list) else []) if isinstance(n, dict)
        ]
        state = doc.get("state")
        self.state: dict[str, Any] = state if isinstance(state, dict) else {}
        self.ids: dict[str, int] = {}
        self.written: set[str] = set()

    def error(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def run(self) -> None:
        for i, n in self.nodes:
            node_id = n.get("id")
            if isinstance(node_id, str):
                if node_id in self.ids:
                    self.error(f"nodes[{i}].id", f"duplicate id '{node_id}' (also nodes[{self.ids[node_id]}])")
                else:
                    self.ids[node_id] = i
            self.written.update(_strings(n.get("writes")))
        entry = self.doc.get("entry")
        if isinstance(entry, str) and entry not in self.ids:
            self.error("entry", f"no node has id '{entry}'{self._known()}")
        fields = self.doc.get("fields")
        for name, rule in (fields if isinstance(fields, dict) else {}).items():
            if name not in self.written:
                self.error(f"fields.{name}", f"no node writes '{name}'; a compare rule is for a field the pack writes")
            if isinstance(rule, dict) and "tolerance" in rule and rule.get("compare") != "number":
                self.error(f"fields.{name}.tolerance", "a tolerance goes only with compare: number")
        for i, n in self.nodes:
            self.node(i, n)
        edges = self.doc.get("edges")
        listed = [(j, e) for j, e in enumerate(edges if isinstance(edges, list) else []) if isinstance(e, dict)]
        for j, e in listed:
            self.edge(j, e)
        self.graph(listed)

    def _known(self) -> str:
        return f"; the nodes are {', '.join(sorted(self.ids))}" if self.ids else ""

    def node(self, i: int, n: dict[str, Any]) -> None:
        at = f"nodes[{i}]"
        kind = n.get("kind")
        if kind not in NODE_KINDS:
            return
        for key, kinds in _KIND_KEYS.items():
            if key in n and kind not in kinds and _is_set(key, n[key]):
                self.error(f"{at}.{key}", f"a {kind} node has no '{key}' (only {', '.join(sorted(kinds))} nodes do)")
        reads = _strings(n.get("reads"))
        writes = _strings(n.get("writes"))
        for k, read in enumerate(reads):
            self.ref(f"{at}.reads[{k}]", read)
        if kind in ("generate", "human"):
            if not writes:
                self.error(f"{at}.writes", f"a {kind} node must write at least one field")
            for k, w in enumerate(writes):
                if w in self.state:
                    continue
                if self.spec is not None and w not in self.spec.outputs:
                    self.error(
                        f"{at}.writes[{k}]",
                        f"'{w}' is neither a spec output ({', '.join(self.spec.outputs)}) nor a key of 'state'",
                    )
            if len(set(writes)) != len(writes):
                self.error(f"{at}.writes", "a field is written twice")
        if kind == "generate":
            self.generate(at, n, reads, writes)
        elif kind == "tool":
            self.tool(at, n)
        elif kind == "assert":
            expr = n.get("expr")
            if not isinstance(expr, str):
                if "expr" not in n:
                    self.error(at, "an assert node needs 'expr', the check it makes")
            else:
                self.expr(f"{at}.expr", expr, reads, "read")
        elif kind == "end":
            for k, f in enumerate(_strings(n.get("output"))):
                self.ref(f"{at}.output[{k}]", f)

    def generate(self, at: str, n: dict[str, Any], reads: list[str], writes: list[str]) -> None:
        samples = n.get("samples", 1)
        agree = n.get("agree")
        if isinstance(samples, int) and isinstance(agree, int) and agree > samples:
            self.error(f"{at}.agree", f"agree {agree} is more than samples {samples}")
        if isinstance(agree, int) and agree > 1 and samples == 1:
            self.error(f"{at}.agree", "agree needs samples >= 2")
        confidence = n.get("confidence")
        gated = confidence.get("field") if isinstance(confidence, dict) else None
        if isinstance(gated, str) and gated not in writes:
            self.error(f"{at}.confidence.field", f"'{gated}' is not one of the node's writes")
        check = n.get("assert")
        if isinstance(check, str):
            self.expr(f"{at}.assert", check, reads + writes, "read or written")

    def tool(self, at: str, n: dict[str, Any]) -> None:
        name = n.get("tool")
        if not isinstance(name, str):
            if "tool" not in n:
                self.error(at, "a tool node needs 'tool', the name of the host tool it calls")
        elif self.spec is not None and name not in self.spec.tools:
            listed = ", ".join(self.spec.tools) if self.spec.tools else "none"
            self.error(f"{at}.tool", f"'{name}' is not one of the spec's tools ({listed})")
        args = n.get("args")
        if isinstance(args, dict):
            for arg, path in args.items():
                if isinstance(path, str):
                    self.ref(f"{at}.args.{arg}", path)

    def expr(self, at: str, source: str, reads: list[str], what: str) -> None:
        try:
            compiled = compile_expr(source)
        except ExprError as e:
            self.error(at, str(e))
            return
        for ref in sorted(compiled.references):
            if not any(ref == r or ref.startswith(r + ".") for r in reads):
                self.error(at, f"uses '{ref}', which the node does not {what}; add it to 'reads'")

    def ref(self, at: str, path: str) -> None:
        root, dot, rest = path.partition(".")
        if root == "input":
            name = rest.split(".", 1)[0]
            if not dot or not name:
                self.error(at, "'input' alone is not a field; read 'input.<name>'")
            elif self.spec is not None and name not in self.spec.inputs:
                self.error(at, f"'{path}': '{name}' is not a spec input ({', '.join(self.spec.inputs)})")
            return
        if root not in self.written:
            self.error(at, f"'{path}': no node writes '{root}'")

    def graph(self, edges: list[tuple[int, dict[str, Any]]]) -> None:
        """The shape checks the pack loader makes too, said in plan terms."""
        kinds = {n["id"]: n.get("kind") for _, n in self.nodes if isinstance(n.get("id"), str)}
        nodes = {n["id"]: n for _, n in self.nodes if isinstance(n.get("id"), str)}
        seen_form: dict[tuple[str, str], int] = {}
        unconditional: dict[str, int] = {}
        has_to: set[str] = set()
        for j, e in edges:
            source = e.get("from")
            if not isinstance(source, str) or source not in kinds:
                continue
            kind = kinds[source]
            if kind == "end":
                self.error(f"edges[{j}]", f"'{source}' is an end node; an end has no outgoing edges")
                continue
            if "to" in e:
                has_to.add(source)
                if source in unconditional:
                    self.error(
                        f"edges[{j}]",
                        f"never taken: edges[{unconditional[source]}] from '{source}' has no 'when' and comes first",
                    )
                elif "when" not in e:
                    unconditional[source] = j
            for form in ("on_fail", "on_unsure"):
                if form not in e:
                    continue
                if (source, form) in seen_form:
                    self.error(
                        f"edges[{j}].{form}",
                        f"'{source}' already has an {form} edge (edges[{seen_form[source, form]}])",
                    )
                seen_form[source, form] = j
                if form == "on_fail" and kind == "human":
                    self.error(f"edges[{j}].on_fail", "a human node cannot fail; it has no on_fail edge")
                node = nodes[source]
                gated = kind == "generate" and (
                    (isinstance(node.get("samples"), int) and node["samples"] >= 2) or bool(node.get("confidence"))
                )
                if form == "on_unsure" and not gated:
                    self.error(
                        f"edges[{j}].on_unsure", f"'{source}' is never unsure: it needs samples >= 2 or confidence"
                    )
        for i, n in self.nodes:
            node_id = n.get("id")
            kind = n.get("kind")
            if isinstance(node_id, str) and kind in NODE_KINDS and kind != "end" and node_id not in has_to:
                self.error(f"nodes[{i}]", f"'{node_id}' has no 'to' edge; every node but an end goes on somewhere")
        entry = self.doc.get("entry")
        if not isinstance(entry, str) or entry not in kinds:
            return
        reach, todo = {entry}, [entry]
        while todo:
            here = todo.pop()
            for _, e in edges:
                if e.get("from") != here:
                    continue
                for form in ("to", "on_fail", "on_unsure"):
                    target = e.get(form)
                    if isinstance(target, str) and target in kinds and target not in reach:
                        reach.add(target)
                        todo.append(target)
        for i, n in self.nodes:
            node_id = n.get("id")
            if isinstance(node_id, str) and node_id in kinds and node_id not in reach and self.ids.get(node_id) == i:
                self.error(f"nodes[{i}]", f"'{node_id}' cannot be reached from the entry '{entry}'")
        links = [
            (e["from"], e[form], form)
            for _, e in edges
            for form in ("to", "on_fail", "on_unsure")
            if e.get("from") in kinds and e.get(form) in kinds
        ]
        self.cycles(links, kinds)
        self.dataflow(entry, links, edges, nodes)

    def cycles(self, links: list[tuple[str, str, str]], kinds: Mapping[str, Any]) -> None:
        """Every cycle has a `to` edge that leaves it (else a run loops to its step bound)."""
        after: dict[str, set[str]] = {k: set() for k in kinds}
        for source, target, _ in links:
            after[source].add(target)
        closure: dict[str, set[str]] = {}
        for start in kinds:
            seen, todo = set(), [start]
            while todo:
                for nxt in after[todo.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            closure[start] = seen
        done: set[str] = set()
        for start in kinds:
            if start in done or start not in closure[start]:
                continue
            members = {m for m in closure[start] if start in closure[m]}
            done |= members
            if not any(s in members and t not in members and f == "to" for s, t, f in links):
                ordered = [k for k in kinds if k in members]
                where = self.ids.get(ordered[0], 0)
                self.error(
                    f"nodes[{where}]",
                    f"cycle {' -> '.join([*ordered, ordered[0]])} has no way out: add a 'to' edge with 'when' that leaves it",
                )

    def dataflow(
        self,
        entry: str,
        links: list[tuple[str, str, str]],
        edges: list[tuple[int, dict[str, Any]]],
        nodes: Mapping[str, dict[str, Any]],
    ) -> None:
        """A node reads only what some path from the entry can have written before it; an
        on_fail / on_unsure edge carries nothing the failed node wrote."""
        avail: dict[str, set[str]] = {entry: set()}
        changed = True
        while changed:
            changed = False
            for source, target, form in links:
                if source not in avail:
                    continue
                carried = set(avail[source])
                if form == "to":
                    carried |= set(_strings(nodes[source].get("writes")))
                into = avail.setdefault(target, set())
                if not carried <= into:
                    into |= carried
                    changed = True

        def check(at: str, path: str, known: set[str], node_id: str) -> None:
            root = path.split(".", 1)[0]
            if root != "input" and root in self.written and root not in known:
                self.error(
                    at,
                    f"'{path}': no node before '{node_id}' can have written '{root}' "
                    "(an on_fail or on_unsure edge carries nothing the failed node wrote)",
                )

        for i, n in self.nodes:
            node_id = n.get("id")
            if not isinstance(node_id, str) or node_id not in avail or self.ids.get(node_id) != i:
                continue
            for k, read in enumerate(_strings(n.get("reads"))):
                check(f"nodes[{i}].reads[{k}]", read, avail[node_id], node_id)
            args = n.get("args") if n.get("kind") == "tool" else None
            for arg, path in (args if isinstance(args, dict) else {}).items():
                if isinstance(path, str):
                    check(f"nodes[{i}].args.{arg}", path, avail[node_id], node_id)
        for j, e in edges:
            origin, when = e.get("from"), e.get("when")
            if not isinstance(origin, str) or origin not in avail or not isinstance(when, str) or "to" not in e:
                continue
            try:
                refs = compile_expr(when).references
            except ExprError:
                continue
            known = avail[origin] | set(_strings(nodes[origin].get("writes")))
            for ref in sorted(refs):
                check(f"edges[{j}].when", ref, known, origin)

    def edge(self, j: int, e: dict[str, Any]) -> None:
        at = f"edges[{j}]"
        source = e.get("from")
        if isinstance(source, str) and source not in self.ids:
            self.error(f"{at}.from", f"no node has id '{source}'{self._known()}")
        forms = [k for k in ("to", "on_fail", "on_unsure") if k in e]
        if len(forms) != 1:
            self.error(
                at,
                "an edge has exactly one of 'to', 'on_fail', 'on_unsure'"
                + (f" (this one has {', '.join(forms)})" if forms else ""),
            )
        for key in forms:
            target = e[key]
            if isinstance(target, str) and target not in self.ids:
                self.error(f"{at}.{key}", f"no node has id '{target}'{self._known()}")
        when = e.get("when")
        if "when" in e and "to" not in e:
            self.error(f"{at}.when", "'when' goes only with 'to'")
        if isinstance(when, str):
            try:
                compiled = compile_expr(when)
            except ExprError as exc:
                self.error(f"{at}.when", str(exc))
                return
            for ref in sorted(compiled.references):
                self.ref(f"{at}.when", ref)
