"""The model-free planner: a sound plan from the spec, its induction and the tool
catalogue alone, deterministic (same inputs, same document). It is what `packforge build
--planner rules` uses offline, and the baseline a frontier plan must beat.

What it infers, and from what (docs/compiler.md, "The planners"):

1. **Nodes.** Outputs a tool returns (a catalogue result key) are written by that tool's
   node. The other outputs, in the spec's order, become generate nodes: each closed-choice
   field (an induced enum or const, or a boolean) starts a classification node; a run of
   other fields is one extraction node; a field whose key is present in exactly the same
   gold cases as the node being built (and not in all of them) joins it, because gold
   shows they are written together.
2. **Tools** come in the order the spec names them, each right after the node that
   writes the last of its arguments (an argument maps to the field of the same name, else
   the field sharing most words with it). A tool whose name does not start with a
   read-only verb (get, lookup, fetch, ...) has side effects: the node deciding a
   closed-choice field that feeds it gets an agreement gate (`samples: 3, agree: 2`,
   `on_unsure` -> the unsure end).
3. **Rules** with `expr` become the `assert` of the generate node that writes every field
   they read, or an assert node after the last writer; `on_fail` -> the unsure end.
4. **Ends** are the gold cases' `end` values plus the spec's `unsure_end` (a `human` node
   when gold cases carry `human` answers: it writes their keys and then routes like the
   gated node it stands in for). A node that gold paths show handing a case to the unsure
   end gets a gate (or, without one, `on_fail`).
5. **Routing** from gold: each case leaves the chain after the furthest node that writes a
   field its `expected` holds (or that its `path` names); at each node, the cases leaving
   there for one end must be told apart from every other case at that node by one or two
   tests on fields written so far (`f in [...]` on closed-choice fields, `f == null`,
   `f <= x` / `f >= x` on numbers). The biggest group without such a test takes the
   unconditional edge. A tool's leaving cases take its `on_fail`.
6. **Names** come from the gold `path` entries (the longest path, minus nodes other paths
   skip): tool nodes take the entry sharing a word with the tool's name, generate nodes
   the entries between them in order (adjacent nodes merge when gold shows fewer), so the
   example packs' scripted models (keyed by node id) can drive the regenerated packs.

What it cannot infer: checks that read a tool's result (refund_desk's "never refund more
than is left"), re-reads after a failed check (invoice_extract's `reextract`), routing that
needs three tests at once, and prompts better than the field descriptions."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.induce import Induction
from compiler.planners.base import PlanRequest, PlanResult
from compiler.spec import GoldCase, Spec
from compiler.tools import ToolSpec
from runtime import Cancelled, compile_expr

# A tool named with one of these verbs only reads; any other tool is taken to act on the
# world (a refund, an email), so what feeds it is decided with an agreement gate.
READ_ONLY_VERBS = frozenset({"get", "lookup", "fetch", "find", "search", "read", "list", "check", "query", "load"})
GATE_SAMPLES = 3
GATE_AGREE = 2
_NODE_ID = re.compile(r"[^a-z0-9_]+")
NEXT = "\0next"  # the routing group of cases that go on to the next node


@dataclass
class _Node:
    id: str
    kind: str  # generate | tool | assert
    writes: list[str] = field(default_factory=list)
    tool: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    expr: str | None = None
    asserts: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    gated: bool = False
    closed: bool = False  # a classification node (starts with a closed-choice field)
    on_fail: str | None = None


class RulesPlanner:
    """The model-free planner. `plan` ignores feedback: the same spec gets the same plan."""

    name = "rules"

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        if cancel is not None and cancel.is_set():
            raise Cancelled("compile cancelled")
        return PlanResult(document=rules_plan(request.spec, request.induction, request.catalogue))


def rules_plan(spec: Spec, induction: Induction, catalogue: Mapping[str, ToolSpec]) -> dict[str, Any]:
    """The rules planner's plan document for `spec` (see the module docstring)."""
    return _Builder(spec, induction, catalogue).build()


class _Builder:
    def __init__(self, spec: Spec, induction: Induction, catalogue: Mapping[str, ToolSpec]) -> None:
        self.spec = spec
        self.induction = induction
        self.tools = {name: catalogue.get(name) or ToolSpec(name) for name in spec.tools}
        self.unsure = spec.unsure_end
        # Cases that say where a run goes: not the unsure end's (those are partial).
        self.cases = [c for c in spec.gold if c.end is not None and c.end != self.unsure]
        self.human_answers = [c.human[self.unsure] for c in spec.gold if self.unsure and self.unsure in c.human]

    # -- fields --------------------------------------------------------------------------

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

    # -- 1. nodes ------------------------------------------------------------------------

    def groups(self) -> list[_Node]:
        tool_written = {f for t in self.tools.values() for f in t.result_fields}
        everyone = frozenset(c.id for c in self.cases)
        groups: list[_Node] = []
        seen: frozenset[str] | None = None
        for name in self.spec.outputs:
            if name in tool_written:
                continue
            present = self.presence(name)
            closed = self.closed(name)
            current = groups[-1] if groups else None
            together = current is not None and present == seen and present != everyone
            if current is not None and (together or (not closed and not current.closed)):
                current.writes.append(name)
                continue
            groups.append(_Node(id="", kind="generate", writes=[name], closed=closed))
            seen = present
        return groups

    def place_tools(self, groups: list[_Node]) -> list[_Node]:
        chain: list[_Node] = list(groups)
        outputs = list(self.spec.outputs)
        for tool in self.tools.values():
            written: list[str] = [f for n in chain if n.kind != "tool" for f in n.writes]
            args = {arg: self.arg_source(tool, arg, outputs) for arg in tool.arg_names}
            mapped = {a: s for a, s in args.items() if s is not None}
            node = _Node(id="", kind="tool", tool=tool.name, args=mapped, writes=list(tool.result_fields))
            # Right after the node that writes the last argument (else at the end).
            after = -1
            for i, n in enumerate(chain):
                if any(s in n.writes for s in mapped.values()):
                    after = i
            if not mapped or any(s not in written and not s.startswith("input.") for s in mapped.values()):
                after = len(chain) - 1
            chain.insert(after + 1, node)
        return chain

    def arg_source(self, tool: ToolSpec, arg: str, outputs: list[str]) -> str | None:
        if arg in outputs:
            return arg
        if arg in self.spec.inputs:
            return f"input.{arg}"
        words = set(arg.lower().split("_"))
        declared = tool.args.get("properties", {}).get(arg, {})
        wanted = declared.get("type") if isinstance(declared, dict) else None
        best: tuple[int, int, str] | None = None
        for i, name in enumerate(outputs):
            shared = len(words & set(name.lower().split("_")))
            if not shared:
                continue
            f = self.induction.fields.get(name)
            typed = 1 if wanted and f is not None and _json_type_matches(wanted, f.types) else 0
            key = (shared + typed, -i, name)
            if best is None or key > best:
                best = key
        return best[2] if best else None

    # -- 3. rules ------------------------------------------------------------------------

    def place_rules(self, chain: list[_Node]) -> list[_Node]:
        out = list(chain)
        for rule in self.spec.rules:
            if rule.expr is None:
                continue
            refs = {r.split(".", 1)[0] for r in compile_expr(rule.expr).references if not r.startswith("input.")}
            writers = [i for i, n in enumerate(out) if set(n.writes) & refs]
            if not writers:
                continue
            last = writers[-1]
            node = out[last]
            if node.kind == "generate" and refs <= set(node.writes):
                node.asserts.append(rule.expr)
                node.rules.append(rule.text)
            else:
                out.insert(last + 1, _Node(id="", kind="assert", expr=" ".join(rule.expr.split()), rules=[rule.text]))
        return out

    # -- 6. names ------------------------------------------------------------------------

    def reference_slots(self, ends: set[str]) -> list[str]:
        paths = [list(c.path) for c in self.spec.gold if c.path]
        if not paths:
            return []
        ref = max(paths, key=len)
        slots = [s for s in ref if s not in ends and s != self.unsure]
        # A slot another path skips (its neighbours adjacent there) is a detour, not the chain.
        adjacent = {(p[i], p[i + 1]) for p in paths for i in range(len(p) - 1)}
        kept = []
        for i, s in enumerate(slots):
            before = slots[i - 1] if i > 0 else None
            after = slots[i + 1] if i + 1 < len(slots) else None
            if before is not None and after is not None and (before, after) in adjacent:
                continue
            if s not in kept:
                kept.append(s)
        return kept

    def name(self, chain: list[_Node], ends: set[str]) -> None:
        slots = self.reference_slots(ends)
        used: set[str] = set(ends) | ({self.unsure} if self.unsure else set())
        # Tools take the slot sharing a word with their name.
        tool_slot: dict[int, int] = {}
        for i, n in enumerate(chain):
            if n.kind == "tool" and n.tool:
                words = set(n.tool.split("_"))
                for j, s in enumerate(slots):
                    if j not in tool_slot.values() and words & set(s.split("_")):
                        tool_slot[i] = j
                        break
        # Generate nodes: the slots between tool slots, in order; merge when gold shows fewer.
        bounds = sorted(tool_slot.items())
        segments: list[tuple[list[int], list[int]]] = []  # (chain indexes of generate nodes, slot indexes)
        prev_chain, prev_slot = -1, -1
        for ci, si in [*bounds, (len(chain), len(slots))]:
            gens = [k for k in range(prev_chain + 1, ci) if chain[k].kind == "generate"]
            segments.append((gens, list(range(prev_slot + 1, si))))
            prev_chain, prev_slot = ci, si
        merged: set[int] = set()
        for gens, seg_slots in segments:
            if not seg_slots:
                continue
            while len(gens) > len(seg_slots):
                # Merge the smallest node into the one before it (the first into the next).
                k = min(range(len(gens)), key=lambda j: (len(chain[gens[j]].writes), -j))
                into = gens[k - 1] if k > 0 else gens[1]
                src = chain[gens[k]]
                dst = chain[into]
                dst.writes = [f for f in self.spec.outputs if f in dst.writes or f in src.writes]
                dst.asserts += src.asserts
                dst.rules += src.rules
                dst.closed = dst.closed or src.closed
                merged.add(gens[k])
                gens = [g for g in gens if g != gens[k]]
            for g, si in zip(gens, seg_slots, strict=False):
                chain[g].id = slots[si]
                used.add(slots[si])
        for i, j in tool_slot.items():
            chain[i].id = slots[j]
            used.add(slots[j])
        for i in sorted(merged, reverse=True):
            del chain[i]
        for n in chain:
            if not n.id:
                n.id = self.fresh(self.default_id(n), used)
                used.add(n.id)

    def default_id(self, n: _Node) -> str:
        if n.kind == "tool":
            return n.tool or "tool"
        if n.kind == "assert":
            return "check"
        first = _NODE_ID.sub("_", n.writes[0].lower()).strip("_") or "field"
        if len(n.writes) == 1:
            return first if n.closed else f"extract_{first}"
        return f"{'decide' if n.closed else 'extract'}_{first}"

    @staticmethod
    def fresh(base: str, used: set[str]) -> str:
        base = base if re.fullmatch(r"[a-z][a-z0-9_]*", base) else f"n_{base}"
        if base not in used:
            return base
        for k in itertools.count(2):
            if f"{base}_{k}" not in used:
                return f"{base}_{k}"
        raise AssertionError("unreachable")

    # -- 5. routing ----------------------------------------------------------------------

    def reached(self, case: GoldCase, chain: list[_Node]) -> int:
        """How far along the chain a case goes: the furthest node writing a field its
        expected holds, or named in its path."""
        at = 0
        for i, n in enumerate(chain):
            if set(n.writes) & set(case.expected) or (case.path and n.id in case.path):
                at = i
        return at

    def routes(self, chain: list[_Node]) -> dict[int, list[tuple[str, str | None]]]:
        """Per chain index: its `to` edges (target, when), in order."""
        reach = {c.id: self.reached(c, chain) for c in self.cases}
        out: dict[int, list[tuple[str, str | None]]] = {}
        for i, n in enumerate(chain):
            here = [c for c in self.cases if reach[c.id] == i]
            onward = [c for c in self.cases if reach[c.id] > i]
            ends_later = {c.end for c in onward}
            nxt = chain[i + 1].id if i + 1 < len(chain) else None
            if n.kind == "tool":
                # A tool's leaving cases are the ones it fails on.
                leaving = sorted({c.end for c in here if c.end}, key=lambda e: _count(here, e), reverse=True)
                if leaving and nxt is not None:
                    n.on_fail = leaving[0]
                    out[i] = [(nxt, None)]
                elif nxt is None:
                    out[i] = [(self.default_end(here), None)]
                else:
                    out[i] = [(nxt, None)]
                continue
            written = [f for m in chain[: i + 1] for f in m.writes]
            groups: dict[str, list[GoldCase]] = {}
            for c in here:
                assert c.end is not None
                groups.setdefault(c.end, []).append(c)
            if nxt is not None and onward:
                groups[NEXT] = onward
            if nxt is None and not groups:
                groups[self.default_end([])] = []
            order = sorted(groups, key=lambda g: (-len(groups[g]), g))
            tests: dict[str, str | None] = {}
            skipped: set[str] = set()
            for g in order:
                members = groups[g]
                others = [c for h in groups if h != g for c in groups[h]]
                test = self.separate(members, others, written)
                if test is None and g != NEXT and g in ends_later:
                    # These cases' expected stops early, and later nodes reach the same
                    # end: gold does not say they left here, unless a path does.
                    certain = [c for c in members if _leaves(c, n.id, g)]
                    test = self.separate(certain, others, written) if certain else None
                    if test is None:
                        skipped.add(g)
                tests[g] = test
            open_groups = [g for g in order if g not in skipped]
            if not open_groups:
                open_groups = [order[0]]
            default = next((g for g in open_groups if tests[g] is None), NEXT if NEXT in groups else open_groups[-1])
            edges: list[tuple[str, str | None]] = []
            for g in open_groups:
                test = tests[g]
                if g != default and test is not None:
                    edges.append((nxt if g == NEXT and nxt else g, test))
            edges.append((nxt if default == NEXT and nxt else default, None))
            out[i] = edges
        return out

    def default_end(self, cases: Sequence[GoldCase]) -> str:
        ends = [c.end for c in cases if c.end] or [c.end for c in self.cases if c.end]
        if ends:
            return max(sorted(set(ends)), key=ends.count)
        return self.unsure or "done"

    def separate(self, members: list[GoldCase], others: list[GoldCase], written: list[str]) -> str | None:
        """A test over `written` fields true on every member and false on every other
        case (cases lacking the field are not counted against it); None when no test of
        one or two conditions does it."""
        if not members:
            return None
        candidates: list[tuple[str, set[str], set[str]]] = []  # (expr, members true, others true)
        for name in written:
            conds = self.conditions(name, members)
            for expr in conds:
                compiled = compile_expr(expr)
                t_members = {c.id for c in members if _holds(compiled, c.expected)}
                t_others = {c.id for c in others if name in c.expected and _holds(compiled, c.expected)}
                candidates.append((expr, t_members, t_others))
        ids = {c.id for c in members}
        for expr, tm, to in candidates:
            if tm == ids and not to:
                return expr
        for (e1, m1, o1), (e2, m2, o2) in itertools.combinations(candidates, 2):
            if m1 == ids and m2 == ids and not (o1 & o2):
                # A case lacking one field cannot be told apart on it: require both known.
                return f"{e1} and {e2}"
        return None

    def conditions(self, name: str, members: list[GoldCase]) -> list[str]:
        vals = [c.expected[name] for c in members if name in c.expected]
        if len(vals) < len(members):
            return []
        out: list[str] = []
        if all(v is None for v in vals):
            out.append(f"{name} == null")
        elif (
            all(v is not None for v in vals) and name in self.induction.fields and self.induction.fields[name].nullable
        ):
            out.append(f"{name} != null")
        if self.closed(name):
            distinct = sorted({_literal(v) for v in vals})
            if len(distinct) == 1:
                out.append(f"{name} == {distinct[0]}")
            elif len(distinct) < len(self.values(name)) + 1:
                out.append(f"{name} in [{', '.join(distinct)}]")
        if self.numeric(name) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            lo, hi = min(vals), max(vals)
            out.append(f"{name} != null and {name} <= {_literal(hi)}")
            out.append(f"{name} != null and {name} >= {_literal(lo)}")
        return out

    # -- the document --------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        ends: set[str] = {c.end for c in self.spec.gold if c.end and c.end != self.unsure}
        chain = self.place_rules(self.place_tools(self.groups()))
        self.name(chain, ends)
        self.gate(chain)
        routes = self.routes(chain)
        human = bool(self.human_answers)
        nodes: list[dict[str, Any]] = []
        edges: list[dict[str, Any]] = []
        state: dict[str, Any] = {}
        inputs = [f"input.{k}" for k in self.spec.inputs]
        written: list[str] = []
        gated_at: int | None = None
        for i, n in enumerate(chain):
            reads = inputs + [f for f in written if f not in n.writes]
            if n.kind == "generate":
                doc: dict[str, Any] = {
                    "id": n.id,
                    "kind": "generate",
                    "description": self.describe(n),
                    "reads": reads,
                    "writes": list(n.writes),
                    "instructions": self.instructions(n),
                }
                if n.gated:
                    doc["samples"] = GATE_SAMPLES
                    doc["agree"] = GATE_AGREE
                    gated_at = i if gated_at is None else gated_at
                if n.asserts:
                    doc["assert"] = " and ".join(f"({a.strip()})" for a in n.asserts)
                if any(
                    self.induction.fields.get(f) and set(self.induction.fields[f].types) & {"array", "object"}
                    for f in n.writes
                ):
                    doc["max_tokens"] = 768
            elif n.kind == "tool":
                tool = self.tools[n.tool or ""]
                doc = {
                    "id": n.id,
                    "kind": "tool",
                    "description": tool.description or f"Call {n.tool}.",
                    "tool": n.tool,
                    "args": dict(n.args),
                    "reads": list(dict.fromkeys(n.args.values())),
                    "writes": list(n.writes),
                }
            else:
                refs = sorted(compile_expr(n.expr or "true").references)
                doc = {
                    "id": n.id,
                    "kind": "assert",
                    "description": " ".join(n.rules),
                    "reads": list(dict.fromkeys(r.split(".", 1)[0] if not r.startswith("input.") else r for r in refs)),
                    "expr": n.expr,
                }
            nodes.append(doc)
            written += [w for w in n.writes if w not in written]
            for target, when in routes[i]:
                edges.append({"from": n.id, "to": target, **({"when": when} if when else {})})
            fail = n.on_fail
            if fail is None and self.unsure and (n.asserts or n.kind == "assert" or n.gated or n.kind == "tool"):
                fail = self.unsure
            if fail is None and self.unsure and i == 0 and not human:
                fail = self.unsure  # a case the first node cannot answer goes to a person
            if fail:
                edges.append({"from": n.id, "on_fail": fail})
            if n.gated and self.unsure:
                edges.append({"from": n.id, "on_unsure": self.unsure})
        if self.unsure:
            if human:
                keys = list(dict.fromkeys(k for answer in self.human_answers for k in answer))
                stop = gated_at if gated_at is not None else len(chain) - 1
                before = [f for n in chain[:stop] for f in n.writes]
                nodes.append(
                    {
                        "id": self.unsure,
                        "kind": "human",
                        "description": "A person decides what the model could not.",
                        "reads": inputs + [f for f in dict.fromkeys(before) if f not in keys],
                        "writes": keys,
                        "instructions": "Decide this case: " + "; ".join(self.field_line(k) for k in keys),
                    }
                )
                for k in keys:
                    if k not in self.spec.outputs:
                        state[k] = _state_schema([a.get(k) for a in self.human_answers])
                for target, when in routes[stop]:
                    edges.append({"from": self.unsure, "to": target, **({"when": when} if when else {})})
            else:
                nodes.append(
                    {
                        "id": self.unsure,
                        "kind": "end",
                        "description": "The model could not decide; a person takes over.",
                    }
                )
        for end in sorted(ends, key=lambda e: [c.end for c in self.spec.gold].index(e)):
            nodes.append({"id": end, "kind": "end", "description": self.end_description(end)})
        referenced = {e.get("to") for e in edges} | {e.get("on_fail") for e in edges}
        for target in sorted(t for t in referenced if t and t not in {n["id"] for n in nodes}):
            nodes.append({"id": target, "kind": "end"})
        doc = {
            "name": self.spec.name,
            "summary": (
                "Made by the rules planner from the spec, the induced schemas and the gold cases: "
                "classification nodes for closed-choice fields, extraction nodes for the rest, "
                "tools in the spec's order, rules as asserts, routing inferred from the gold ends."
            ),
            "entry": chain[0].id if chain else self.unsure or "done",
            "nodes": nodes,
            "edges": edges,
        }
        if state:
            doc["state"] = state
        return doc

    def gate(self, chain: list[_Node]) -> None:
        if not self.unsure:
            return
        for t in chain:
            if t.kind != "tool" or not t.tool or t.tool.split("_")[0].lower() in READ_ONLY_VERBS:
                continue
            for n in chain:
                if (
                    n.kind == "generate"
                    and set(n.writes) & set(t.args.values())
                    and any(self.closed(f) for f in n.writes)
                ):
                    n.gated = True
        # A node that gold paths show handing a case to the unsure end.
        ids = [n.id for n in chain]
        for c in self.spec.gold:
            if c.path and c.end == self.unsure and c.path[-1] == self.unsure:
                known = [p for p in c.path[:-1] if p in ids]
                if known:
                    node = chain[ids.index(known[-1])]
                    if node.kind == "generate":
                        node.gated = True

    def field_line(self, name: str) -> str:
        f = self.spec.outputs.get(name)
        return f"{name}: {f.description}" if f else name

    def describe(self, n: _Node) -> str:
        what = "Decide" if n.closed else "Extract"
        return f"{what} {', '.join(n.writes)}."

    def instructions(self, n: _Node) -> str:
        lines = [self.spec.task.strip(), "", "Fill in:"]
        for name in n.writes:
            line = f"- {self.field_line(name)}"
            vals = self.values(name)
            if vals and self.closed(name):
                line += f" (one of: {', '.join(json.dumps(v) for v in vals)})"
            copied = self.induction.copied.get(name)
            if copied:
                line += f" Copy it exactly as written in {copied}."
            lines.append(line)
        if n.rules:
            lines += ["", "Rules:"] + [f"- {' '.join(r.split())}" for r in n.rules]
        return "\n".join(lines)

    def end_description(self, end: str) -> str:
        n = sum(1 for c in self.spec.gold if c.end == end)
        return f"Where {n} gold case{'s' if n != 1 else ''} end."


def _leaves(case: GoldCase, node: str, end: str) -> bool:
    """The case's path shows it going from `node` straight to `end`."""
    path = list(case.path or ())
    return any(a == node and b == end for a, b in itertools.pairwise(path))


def _count(cases: Sequence[GoldCase], end: str) -> int:
    return sum(1 for c in cases if c.end == end)


def _holds(compiled: Any, expected: Mapping[str, Any]) -> bool:
    try:
        return bool(compiled.truthy(dict(expected)))
    except Exception:  # a test that cannot be evaluated does not hold (as in `when`)
        return False


def _literal(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    return json.dumps(v)


def _json_type_matches(wanted: Any, types: Sequence[str]) -> bool:
    want = set(wanted) if isinstance(wanted, list) else {wanted}
    have = set(types) | ({"number"} if "integer" in types else set())
    return bool(want & have)


def _state_schema(values: Sequence[Any]) -> dict[str, Any]:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {str}:
        return {"type": "string"}
    if kinds and kinds <= {int, float}:
        return {"type": "number"}
    if kinds == {bool}:
        return {"type": "boolean"}
    return {}
