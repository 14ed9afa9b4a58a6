"""Whole-graph checks: entry, reachability, dataflow, cycles, routing, tools."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from runtime.errors import PackIssue
from runtime.nodes import NODE_KINDS
from runtime.nodes.base import covered
from runtime.pack.model import Node, Pack
from runtime.pack.yamlsrc import SourceMap


def check_graph(
    pack: Pack,
    graph: SourceMap,
    manifest: SourceMap,
    issues: list[PackIssue],
    *,
    unresolved: Sequence[tuple[str | None, str | None]] = (),
) -> None:
    """Append the whole-graph problems to `issues`; those not of a more precise kind are "graph".

    `unresolved` holds the edges the loader refused for naming an unknown node, as
    (source, target) with None for the unknown end. Each was reported once already; the
    checks that reason about paths do not report what follows from it (the nodes it was
    meant to reach as unreachable, its source as having no way on, reads its path would
    have written), so one typo in an edge gives one problem, not a cascade."""
    start = len(issues)
    _check_graph(pack, graph, manifest, issues, unresolved)
    issues[start:] = [replace(i, kind="graph") if i.kind == "value" else i for i in issues[start:]]


def _check_graph(
    pack: Pack,
    graph: SourceMap,
    manifest: SourceMap,
    issues: list[PackIssue],
    unresolved: Sequence[tuple[str | None, str | None]],
) -> None:
    nodes = pack.nodes
    if not nodes:
        return
    if pack.entry and pack.entry not in nodes:
        issues.append(manifest.issue(f"entry '{pack.entry}' is not a node in graph.yaml", "entry", kind="reference"))
        return
    if not pack.entry:
        return
    broken = {source for source, _ in unresolved}  # None: an edge from an unknown node
    _check_routing(pack, graph, issues, broken)
    reachable = _reachable(pack, [target for _, target in unresolved if target is not None])
    # A refused edge leaving a reachable node (or leaving a node nobody can name) may have
    # led anywhere: what the walk would reach past it is unknown, so nothing is unreachable.
    unknown_paths = any(source is None or source in reachable for source in broken)
    for node_id in nodes:
        if node_id not in reachable and not unknown_paths:
            issues.append(
                graph.issue(
                    f"node '{node_id}' is unreachable from entry '{pack.entry}'; add an edge to it or remove it",
                    "nodes",
                    node_id,
                )
            )
    _check_cycles(pack, graph, issues, broken)
    if not unresolved:  # with an edge missing, what a path can have written is unknown
        _check_dataflow(pack, graph, reachable, issues)
    for node in nodes.values():
        offered = tuple(getattr(node.config, "tools", ()))  # a choose_tool node's subset
        for name, key in [(node.tool, "tool")] + [(t, "tools") for t in offered]:
            if name is not None and name not in pack.tools:
                issues.append(
                    graph.issue(
                        f"node '{node.id}' uses tool '{name}', which the manifest's 'tools' does not list; add it there",
                        "nodes",
                        node.id,
                        key,
                        kind="reference",
                    )
                )
        _check_answer_node(pack, node, graph, issues)
        _check_continues(pack, node, graph, issues)
    for name in pack.output or ():
        if not any(name in n.writes for n in nodes.values()):
            issues.append(manifest.issue(f"output field '{name}' is written by no node", "output", kind="reference"))


def _check_answer_node(pack: Pack, node: Node, graph: SourceMap, issues: list[PackIssue]) -> None:
    """A node whose config names `to` (choose_tool: the forced final-answer node) routes
    there by the graph's one unconditional edge, and that node is a generate node."""
    to = getattr(node.config, "to", None)
    if not isinstance(to, str) or not to:
        return
    target = pack.nodes.get(to)
    if target is None:
        issues.append(
            graph.issue(f"node '{node.id}': 'to' names unknown node '{to}'", "nodes", node.id, "to", kind="reference")
        )
        return
    if target.kind != "generate":
        issues.append(
            graph.issue(
                f"node '{node.id}': 'to' must be a generate node (it gives the final answer); "
                f"'{to}' is a {target.kind} node",
                "nodes",
                node.id,
                "to",
            )
        )
    nexts = pack.outgoing(node.id)
    if [(e.target, e.when) for e in nexts] != [(to, None)]:
        issues.append(
            graph.issue(
                f"node '{node.id}' ends its loop at '{to}': its one 'to' edge must be {{from: {node.id}, to: {to}}} "
                "(no 'when'); on_fail may go elsewhere",
                "nodes",
                node.id,
                "to",
            )
        )


def _check_continues(pack: Pack, node: Node, graph: SourceMap, issues: list[PackIssue]) -> None:
    """`continues:` names another generate node, following it never comes back
    (runtime.messages builds the conversation by following it), and the node reads
    what that conversation shows: the other node's reads and writes."""
    if node.continues is None:
        return
    seen = [node.id]
    at: str | None = node.continues
    while at is not None:
        target = pack.nodes.get(at)
        problem = ""
        if target is None:
            problem = f"continues '{at}', which is not a node in graph.yaml"
        elif target.kind != "generate":
            problem = f"continues '{at}', a {target.kind} node; only a generate node's conversation goes on"
        elif at in seen:
            problem = "continues in a circle (" + " -> ".join([*seen, at]) + ")"
        if problem:
            issues.append(graph.issue(f"node '{node.id}' {problem}", "nodes", node.id, "continues", kind="reference"))
            return
        assert target is not None
        seen.append(at)
        at = target.continues
    earlier = pack.nodes[node.continues]
    # The conversation's few-shot turns are its first node's (a continuing node has none
    # of its own); their answers show this node's writes too (runtime.messages).
    first = pack.nodes[seen[-1]]
    shared = first.examples
    if shared is not None:
        for example in shared.items:
            missing = [w for w in node.writes if w not in example.expected]
            if missing:
                issues.append(
                    PackIssue(
                        shared.file,
                        f"example '{example.id}' has no expected {missing[0]}: node '{node.id}' continues "
                        f"the conversation of '{first.id}', whose few-shot answers show it",
                        example.line,
                        kind="missing",
                    )
                )
                return
    unread = [r for r in (*earlier.reads, *earlier.writes) if not covered(r, node.reads)]
    if unread:
        issues.append(
            graph.issue(
                f"node '{node.id}' continues '{node.continues}', whose conversation shows '{unread[0]}'; "
                "add it to the node's reads",
                "nodes",
                node.id,
                "reads",
                kind="reference",
            )
        )


def _check_routing(pack: Pack, graph: SourceMap, issues: list[PackIssue], broken: set[str | None]) -> None:
    for node in pack.nodes.values():
        at = ("nodes", node.id)
        nexts = pack.outgoing(node.id)
        kind = NODE_KINDS[node.kind]
        if kind.terminal:
            if any(e.source == node.id for e in pack.edges):
                issues.append(graph.issue(f"{node.kind} node '{node.id}' cannot have outgoing edges", *at))
            continue
        if not nexts and node.id not in broken:
            ends = " or ".join(f"kind: {name}" for name, k in NODE_KINDS.items() if k.terminal)
            issues.append(graph.issue(f"node '{node.id}' has no outgoing 'to' edge; add one or make it {ends}", *at))
        for earlier, later in itertools.pairwise(nexts):
            if earlier.when is None:
                issues.append(
                    graph.issue(
                        f"edge {node.id} -> {later.target} is never taken: the edge before it "
                        f"({node.id} -> {earlier.target}) has no 'when'; put unconditional edges last",
                        "edges",
                        later.index,
                    )
                )
        for edge_kind in ("on_fail", "on_unsure"):
            if len(pack.outgoing(node.id, edge_kind)) > 1:
                issues.append(graph.issue(f"node '{node.id}' has more than one {edge_kind} edge; keep one", *at))
        if pack.outgoing(node.id, "on_unsure") and node.samples < 2 and node.confidence is None:
            issues.append(
                graph.issue(
                    f"node '{node.id}' has an on_unsure edge but no 'samples' (>= 2) and no 'confidence' gate: the "
                    "edge could never be taken; set samples and agree, or confidence, or remove the edge",
                    "edges",
                    pack.outgoing(node.id, "on_unsure")[0].index,
                )
            )
        if pack.outgoing(node.id, "on_fail") and not kind.can_fail:
            issues.append(graph.issue(f"a {node.kind} node cannot fail; remove its on_fail edge", *at))


def _reachable(pack: Pack, also: Sequence[str] = ()) -> set[str]:
    """The nodes reachable from the entry, or from `also` (targets of edges whose
    source was mistyped: the author meant something to lead there)."""
    seen = {pack.entry, *also}
    stack = list(seen)
    while stack:
        current = stack.pop()
        for edge in pack.edges:
            if edge.source == current and edge.target not in seen:
                seen.add(edge.target)
                stack.append(edge.target)
    return seen


def _sccs(pack: Pack) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    succ: dict[str, list[str]] = {n: [] for n in pack.nodes}
    for e in pack.edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in pack.nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            for j in range(i, len(succ[node])):
                nxt = succ[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    recurse = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def _check_cycles(pack: Pack, graph: SourceMap, issues: list[PackIssue], broken: set[str | None]) -> None:
    for comp in _sccs(pack):
        members = set(comp)
        looped = len(comp) > 1 or any(e.source == e.target == comp[0] for e in pack.edges)
        if not looped or members & broken:  # the refused edge may have been the way out
            continue
        exits = [e for e in pack.edges if e.source in members and e.target not in members and e.kind == "next"]
        if not exits:
            ordered = [n for n in pack.nodes if n in members]
            issues.append(
                graph.issue(
                    f"cycle {' -> '.join(ordered + ordered[:1])} has no way out: add an edge with 'when' "
                    "that leaves it",
                    "nodes",
                    ordered[0],
                )
            )


def _check_dataflow(pack: Pack, graph: SourceMap, reachable: set[str], issues: list[PackIssue]) -> None:
    """A node may read only fields that some path from the entry can have written.

    An on_fail/on_unsure edge carries what was available before the node, not its
    writes: a node that failed committed nothing."""
    avail: dict[str, set[str]] = {pack.entry: set()}
    changed = True
    while changed:
        changed = False
        for edge in pack.edges:
            if edge.source not in avail:
                continue
            carried = set(avail[edge.source])
            if edge.kind == "next":
                carried |= set(pack.nodes[edge.source].writes)
            target = avail.setdefault(edge.target, set())
            if not carried <= target:
                target |= carried
                changed = True
    for node in pack.nodes.values():
        if node.id not in reachable:
            continue
        known = avail.get(node.id, set())
        for read in node.reads:
            _check_ref(pack, node, read, known, graph, issues, ("nodes", node.id, "reads"))
        for edge in pack.outgoing(node.id):
            if edge.when is None:
                continue
            for ref in edge.when.references:
                _check_ref(pack, node, ref, known | set(node.writes), graph, issues, ("edges", edge.index, "when"))


def _check_ref(
    pack: Pack,
    node: Node,
    ref: str,
    known: set[str],
    graph: SourceMap,
    issues: list[PackIssue],
    at: tuple[str | int, ...],
) -> None:
    root, _, rest = ref.partition(".")
    if root == "input":
        if pack.inputs is not None and rest and rest.split(".")[0] not in pack.inputs:
            issues.append(
                graph.issue(
                    f"node '{node.id}' reads '{ref}', but the manifest's 'inputs' does not declare "
                    f"'{rest.split('.')[0]}'",
                    *at,
                    kind="reference",
                )
            )
        return
    if root not in known:
        issues.append(
            graph.issue(
                f"node '{node.id}' reads '{ref}', which no node before it can have written; "
                "write it earlier or read something else",
                *at,
                kind="reference",
            )
        )
