"""The checks `parse_plan` makes past PLAN_SCHEMA (docs/compiler.md, "What parse_plan
checks"): unique ids, known nodes, keys by kind, spec outputs and tools, expressions that
compile, references something provides, the graph's shape (what the pack loader checks,
said in plan terms) and its dataflow. Each problem starts with its JSON path. The checker
is tolerant of ill-typed parts (the schema has already reported them): it checks what it
can read, and never crashes on what it cannot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compiler.plan_schema import KIND_KEYS, MAX_CALLS, NODE_KINDS, is_set
from runtime import ExprError, compile_expr

if TYPE_CHECKING:
    from compiler.spec import Spec

DONE = "done"  # the choice that ends a choose_tool loop: never a tool's name


def strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class Checker:
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
            self.written.update(strings(n.get("writes")))
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
        for key, kinds in KIND_KEYS.items():
            if key in n and kind not in kinds and is_set(key, n[key]):
                self.error(f"{at}.{key}", f"a {kind} node has no '{key}' (only {', '.join(sorted(kinds))} nodes do)")
        reads = strings(n.get("reads"))
        writes = strings(n.get("writes"))
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
        elif kind == "choose_tool":
            self.choose_tool(at, n, writes)
        elif kind == "assert":
            expr = n.get("expr")
            if not isinstance(expr, str):
                if "expr" not in n:
                    self.error(at, "an assert node needs 'expr', the check it makes")
            else:
                self.expr(f"{at}.expr", expr, reads, "read")
        elif kind == "end":
            for k, f in enumerate(strings(n.get("output"))):
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

    def choose_tool(self, at: str, n: dict[str, Any], writes: list[str]) -> None:
        """Its own keys: the tools it offers, its one write, its call bounds, its `to`
        (whose edge `choose_tool_edges` checks)."""
        tools = n.get("tools")
        if "tools" not in n or tools == []:
            self.error(f"{at}.tools", "a choose_tool node needs 'tools', the names of the host tools it may call")
        elif isinstance(tools, list):
            seen: dict[str, int] = {}
            for k, name in enumerate(tools):
                if not isinstance(name, str):
                    continue
                if name == DONE:
                    self.error(f"{at}.tools[{k}]", f"'{DONE}' is the choice that ends the loop; it cannot name a tool")
                elif name in seen:
                    self.error(f"{at}.tools[{k}]", f"'{name}' is listed twice (also tools[{seen[name]}])")
                elif self.spec is not None and name not in self.spec.tools:
                    listed = ", ".join(self.spec.tools) if self.spec.tools else "none"
                    self.error(f"{at}.tools[{k}]", f"'{name}' is not one of the spec's tools ({listed})")
                seen.setdefault(name, k)
        if len(writes) != 1:
            self.error(
                f"{at}.writes",
                f"a choose_tool node writes exactly one field, the list of calls it made (it has {len(writes)})",
            )
        most, least = n.get("max_calls"), n.get("min_calls")
        most = most if isinstance(most, int) and 1 <= most <= MAX_CALLS else 3
        if isinstance(least, int) and least > most:
            self.error(f"{at}.min_calls", f"min_calls {least} is more than max_calls {most}")
        to = n.get("to")
        if isinstance(to, str) and to not in self.ids:
            self.error(f"{at}.to", f"no node has id '{to}'{self._known()}")

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
        self.choose_tool_edges(edges, kinds, nodes)
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

    def choose_tool_edges(
        self, edges: list[tuple[int, dict[str, Any]]], kinds: Mapping[str, Any], nodes: Mapping[str, dict[str, Any]]
    ) -> None:
        """A choose_tool node has one `to` edge, without `when`, to a generate node (the
        final answer, given from the calls): the one its `to` key names, when it has one."""
        for node_id, node in nodes.items():
            if kinds.get(node_id) != "choose_tool" or self.ids.get(node_id) is None:
                continue
            i = self.ids[node_id]
            outgoing = [(j, e) for j, e in edges if e.get("from") == node_id and "to" in e]
            for j, _ in outgoing[1:]:
                self.error(f"edges[{j}]", f"choose_tool node '{node_id}' has one 'to' edge, to its final-answer node")
            for j, e in outgoing:
                if "when" in e:
                    self.error(f"edges[{j}].when", f"choose_tool node '{node_id}' always goes on to its 'to' node")
            if not outgoing:
                continue
            target = outgoing[0][1].get("to")
            named = node.get("to")
            if isinstance(named, str) and named in kinds and named != target:
                self.error(f"nodes[{i}].to", f"'{named}' is not where its 'to' edge goes ('{target}')")
            if isinstance(target, str) and target in kinds and kinds[target] != "generate":
                self.error(
                    f"edges[{outgoing[0][0]}].to",
                    f"choose_tool node '{node_id}' goes on to a generate node that answers from its calls, "
                    f"not to a {kinds[target]} node",
                )

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
                    carried |= set(strings(nodes[source].get("writes")))
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
            for k, read in enumerate(strings(n.get("reads"))):
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
            known = avail[origin] | set(strings(nodes[origin].get("writes")))
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
