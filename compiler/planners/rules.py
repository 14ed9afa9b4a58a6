"""The model-free planner: a sound plan from the spec, its induction, the gold cases and
the tool catalogue alone, deterministic (same inputs, same document). It is what `packforge
build --planner rules` uses offline, and the baseline a model plan must beat.
docs/compiler.md, "The planners", says in full what it infers and from what; in short:

1. **Nodes** from fields: tool-returned outputs belong to the tool's node; a closed-choice
   field (induced enum or const, boolean) starts a classification node, a run of other
   fields is an extraction node, fields present in exactly the same gold cases go together.
2. **Tools** in the spec's order, each after the node writing its last argument; a tool
   that acts on the world gates the decision feeding it (`samples: 3, agree: 2`,
   `on_unsure` -> the unsure end).
3. **Rules** with `expr` become the assert of the node writing their last field, or of an
   assert node gold names with a check word (`check_total`); a node gold takes right after a
   failed check and other paths skip becomes a two-stage re-read.
4. **Ends** from gold `end`s and the spec's `unsure_end` (a human node when gold carries
   human answers); `on_fail` where a check, a tool or a gold path asks for it.
5. **Routing** from gold: where each case leaves the chain, and one or two tests on fields
   written so far that tell the cases leaving for each end apart from the rest.
6. **Names** from the gold `path` entries (by shared word, then by position), so the
   example packs' scripted models, keyed by node id, can drive the regenerated packs.

What it cannot infer: checks over a tool's result (refund_desk's "never refund more than
is left"), rules given only in words, routes needing three tests, thresholds other than
the observed ones, enum values gold never shows, prompts better than the field
descriptions. It ignores feedback."""

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
# A node gold paths name with one of these words is a check (an assert node).
CHECK_WORDS = frozenset({"check", "verify", "validate", "assert", "ensure", "confirm", "guard"})
GATE_SAMPLES = 3
GATE_AGREE = 2
_NODE_ID = re.compile(r"[^a-z0-9_]+")
NEXT = "\0next"
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


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
    two_stage: bool = False
    detour: tuple[str, str] | None = None  # (from, back to): a node off the chain


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
            if current is not None and (together or (not closed and not current.closed and present == seen)):
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
            if node.kind == "generate":
                # It writes the last field the rule reads and reads the others.
                node.asserts.append(rule.expr)
                node.rules.append(rule.text)
            else:
                out.insert(last + 1, _Node(id="", kind="assert", expr=" ".join(rule.expr.split()), rules=[rule.text]))
        return out

    # -- 6. names ------------------------------------------------------------------------

    def slots(self, ends: set[str]) -> list[str]:
        """Every node id the gold paths name (not ends), in an order every path keeps."""
        paths = [[p for p in c.path if p not in ends and p != self.unsure] for c in self.spec.gold if c.path]
        first: dict[str, int] = {}
        for p in paths:
            for s in p:
                first.setdefault(s, len(first))
        before: dict[str, set[str]] = {s: set() for s in first}
        for p in paths:
            for x, y in itertools.pairwise(p):
                if x != y:
                    before[y].add(x)
        out: list[str] = []
        left = dict(first)
        while left:
            ready = [s for s in left if not (before[s] & set(left))] or list(left)
            pick = min(ready, key=lambda s: left[s])
            out.append(pick)
            del left[pick]
        return out

    def detours(self, slots: list[str], ends: set[str]) -> dict[str, tuple[str, str]]:
        """Slots some paths take between two nodes and other paths skip (a -> s -> b
        beside a -> b): {s: (a, b)}, for a slot no output field names."""
        paths = [list(c.path) for c in self.spec.gold if c.path]
        adjacent = {pair for p in paths for pair in itertools.pairwise(p)}
        out: dict[str, tuple[str, str]] = {}
        for p in paths:
            for a, s, b in zip(p, p[1:], p[2:], strict=False):
                if s in slots and (a, b) in adjacent and s not in out:
                    out[s] = (a, b)
        return out

    def name(self, chain: list[_Node], ends: set[str]) -> list[_Node]:
        """Give chain nodes the ids gold paths use; add check and detour nodes the paths
        name. Returns the new chain."""
        slots = self.slots(ends)
        used: set[str] = set(ends) | ({self.unsure} if self.unsure else set())
        checks = [s for s in slots if set(s.split("_")) & CHECK_WORDS]
        detours = {
            s: ab
            for s, ab in self.detours(slots, ends).items()
            if s not in checks and ab[0] in checks and not self.matches_field(s, chain)
        }
        free = [s for s in slots if s not in checks and s not in detours]
        # By name: a slot sharing a word (or a 5-letter stem) with a tool or a field.
        assigned: dict[int, str] = {}
        for want_tool in (True, False):
            for s in free:
                if s in assigned.values():
                    continue
                best: tuple[int, int] | None = None
                for i, n in enumerate(chain):
                    if i in assigned or (n.kind == "tool") != want_tool:
                        continue
                    names = [n.tool or ""] if n.kind == "tool" else n.writes
                    score = max((_similar(s, f) for f in names), default=0)
                    if score and (best is None or score > best[0]):
                        best = (score, i)
                if best is not None:
                    assigned[best[1]] = s
        # By position, between the nodes named so far; merge when gold shows fewer.
        order = {s: k for k, s in enumerate(slots)}
        anchors = sorted(assigned)
        merged: set[int] = set()
        bounds = [-1, *anchors, len(chain)]
        for lo, hi in itertools.pairwise(bounds):
            gens = [k for k in range(lo + 1, hi) if chain[k].kind == "generate"]
            s_lo = order[assigned[lo]] if lo >= 0 else -1
            s_hi = order[assigned[hi]] if hi < len(chain) else len(slots)
            seg = [s for s in free if s_lo < order[s] < s_hi and s not in assigned.values()]
            if not gens:
                continue
            if not seg:
                # Gold names nothing between two named nodes: these fields belong to the
                # generate node before them.
                if lo >= 0 and chain[lo].kind == "generate":
                    for g in gens:
                        self.merge(chain[g], chain[lo])
                        merged.add(g)
                continue
            while len(gens) > len(seg):
                k = min(range(len(gens)), key=lambda j: (len(chain[gens[j]].writes), -j))
                into = gens[k - 1] if k > 0 else gens[1]
                self.merge(chain[gens[k]], chain[into])
                merged.add(gens[k])
                gens = [g for g in gens if g != gens[k]]
            for g, s in zip(gens, seg, strict=False):
                assigned[g] = s
        for i, s in assigned.items():
            chain[i].id = s
            used.add(s)
        chain = [n for i, n in enumerate(chain) if i not in merged]
        # Check slots take the rules over fields written before them.
        for s in checks:
            chain = self.place_check(chain, s, slots)
            used.add(s)
        for n in chain:
            if not n.id:
                n.id = self.fresh(self.default_id(n), used)
                used.add(n.id)
        # Detours: a re-read after a failed check, else a pass-through.
        for s, (a, b) in detours.items():
            self.place_detour(chain, s, a, b)
            used.add(s)
        # Anything else gold names and the rules planner found no work for.
        ids = {n.id for n in chain}
        for s in slots:
            if s not in ids:
                after = max((i for i, n in enumerate(chain) if n.id in slots[: order[s]]), default=-1)
                chain.insert(after + 1, _Node(id=s, kind="assert", expr="true", rules=[]))
        return chain

    def matches_field(self, slot: str, chain: list[_Node]) -> bool:
        return any(_similar(slot, f) for n in chain for f in ([n.tool or ""] if n.kind == "tool" else n.writes))

    def merge(self, src: _Node, dst: _Node) -> None:
        dst.writes = [f for f in self.spec.outputs if f in dst.writes or f in src.writes]
        dst.asserts += src.asserts
        dst.rules += src.rules

    def place_check(self, chain: list[_Node], slot: str, slots: list[str]) -> list[_Node]:
        """An assert node named `slot` holding the rules whose fields are written before
        it (taken off the generate nodes that held them)."""
        order = {s: k for k, s in enumerate(slots)}
        named_before = [i for i, n in enumerate(chain) if n.id in order and order[n.id] < order[slot]]
        at = (named_before[-1] + 1) if named_before else len(chain)
        # (holder, expr, text) for every rule placed before the slot.
        found: list[tuple[_Node, str, str]] = []
        for n in chain[:at]:
            if n.kind == "generate":
                found += [(n, e, t) for e, t in zip(n.asserts, n.rules, strict=True)]
            elif n.kind == "assert" and not n.id and n.expr:
                found.append((n, n.expr, " ".join(n.rules)))
        # A check named after a field (`check_total`) takes the rules over that field;
        # otherwise every rule before it.
        words = set(slot.split("_")) - CHECK_WORDS
        named = [
            r
            for r in found
            if any(words & set(ref.split(".", 1)[0].lower().split("_")) for ref in compile_expr(r[1]).references)
        ]
        taken = named or found
        exprs = [e for _, e, _ in taken]
        texts = [t for _, _, t in taken]
        for holder, e, _text in taken:
            if holder.kind == "generate":
                k = holder.asserts.index(e)
                del holder.asserts[k]
                del holder.rules[k]
            elif holder in chain:
                at -= 1 if chain.index(holder) < at else 0
                chain.remove(holder)
        expr = " and ".join(f"({' '.join(e.split())})" for e in exprs) if len(exprs) > 1 else None
        expr = expr or (" ".join(exprs[0].split()) if exprs else "true")
        chain.insert(at, _Node(id=slot, kind="assert", expr=expr, rules=texts))
        return chain

    def place_detour(self, chain: list[_Node], slot: str, a: str, b: str) -> None:
        ids = [n.id for n in chain]
        if a in ids and chain[ids.index(a)].kind == "assert":
            check = chain[ids.index(a)]
            # Re-read what the check reads, told to get it right: two-stage, same check.
            refs = {r.split(".", 1)[0] for r in compile_expr(check.expr or "true").references}
            writers = [n for n in chain if n.kind == "generate" and set(n.writes) & refs]
            writes = [f for f in self.spec.outputs if any(f in w.writes for w in writers)]
            if writes:
                node = _Node(
                    id=slot,
                    kind="generate",
                    writes=writes,
                    asserts=[check.expr or "true"],
                    rules=list(check.rules),
                    detour=(a, b),
                )
                node.two_stage = True
                check.on_fail = slot
                chain.append(node)
                return
        chain.append(_Node(id=slot, kind="assert", expr="true", rules=[], detour=(a, b)))

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
        while at + 1 < len(chain) and chain[at + 1].kind == "assert":
            at += 1  # checks come before leaving
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
            if not groups:
                groups[NEXT if nxt is not None else self.default_end([])] = []
            order = sorted(groups, key=lambda g: (-len(groups[g]), g))
            full: dict[str, str | None] = {}
            for g in order:
                others = [c for h in groups if h != g for c in groups[h]]
                full[g] = self.separate(groups[g], others, written)
            # The biggest group no test tells apart takes the unconditional edge.
            # (When every group has a test, going on is the default: the checks ahead
            # still stand between a case and its end.)
            default = next((g for g in order if full[g] is None), NEXT if NEXT in groups else order[-1])
            edges: list[tuple[str, str | None]] = []
            for g in order:
                if g == default:
                    continue
                test = full[g]
                if test is None and g != NEXT and g in ends_later:
                    # These cases' expected stops early and later nodes reach the same
                    # end: gold does not say they left here, unless a path does.
                    certain = [c for c in groups[g] if _leaves(c, n.id, g)]
                    others = [c for h in groups if h != g for c in groups[h]]
                    test = self.separate(certain, others, written) if certain else None
                if test is not None:
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
        # Closed-choice fields first, the latest decision first.
        latest_first = list(reversed(written))
        for name in sorted(latest_first, key=lambda f: not self.closed(f)):
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
        labels = all(isinstance(v, str) and _LABEL.fullmatch(v) for v in vals)
        if self.closed(name) or labels:
            distinct = sorted({_literal(v) for v in vals})
            if len(distinct) == 1:
                out.append(f"{name} == {distinct[0]}")
            elif not self.closed(name) or len(distinct) < len(self.values(name)):
                out.append(f"{name} in [{', '.join(distinct)}]")
        if self.numeric(name) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            lo, hi = min(vals), max(vals)
            out.append(f"{name} != null and {name} <= {_literal(hi)}")
            out.append(f"{name} != null and {name} >= {_literal(lo)}")
        return out

    # -- the document --------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        ends: set[str] = {c.end for c in self.spec.gold if c.end and c.end != self.unsure}
        chain = self.name(self.place_rules(self.place_tools(self.groups())), ends)
        detours = [n for n in chain if n.detour is not None]
        chain = [n for n in chain if n.detour is None]
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
            doc = self.node_doc(n, reads)
            if n.gated and gated_at is None:
                gated_at = i
            nodes.append(doc)
            written += [w for w in n.writes if w not in written]
            for target, when in routes[i]:
                edges.append({"from": n.id, "to": target, **({"when": when} if when else {})})
            fail = n.on_fail
            checks = n.asserts or (n.kind == "assert" and n.expr != "true")
            if fail is None and self.unsure and (checks or n.gated or n.kind == "tool"):
                fail = self.unsure
            if fail:
                edges.append({"from": n.id, "on_fail": fail})
            if n.gated and self.unsure:
                edges.append({"from": n.id, "on_unsure": self.unsure})
        for n in detours:
            assert n.detour is not None
            nodes.append(self.node_doc(n, inputs + written))
            edges.append({"from": n.id, "to": n.detour[1]})
            if self.unsure and n.expr != "true":
                edges.append({"from": n.id, "on_fail": self.unsure})
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

    def node_doc(self, n: _Node, reads: list[str]) -> dict[str, Any]:
        """The plan document's entry for one node."""
        if n.kind == "generate":
            doc: dict[str, Any] = {
                "id": n.id,
                "kind": "generate",
                "description": self.describe(n),
                "reads": reads,
                "writes": list(n.writes),
                "instructions": self.instructions(n),
            }
            if n.two_stage:
                doc["two_stage"] = True
            if n.gated:
                doc["samples"] = GATE_SAMPLES
                doc["agree"] = GATE_AGREE
            if n.asserts:
                parts = [" ".join(a.split()) for a in n.asserts]
                doc["assert"] = parts[0] if len(parts) == 1 else " and ".join(f"({p})" for p in parts)
            if any(
                set(self.induction.fields[f].types) & {"array", "object"}
                for f in n.writes
                if f in self.induction.fields
            ):
                doc["max_tokens"] = 768
            return doc
        if n.kind == "tool":
            tool = self.tools[n.tool or ""]
            return {
                "id": n.id,
                "kind": "tool",
                "description": tool.description or f"Call {n.tool}.",
                "tool": n.tool,
                "args": dict(n.args),
                "reads": list(dict.fromkeys(n.args.values())),
                "writes": list(n.writes),
            }
        refs = sorted(compile_expr(n.expr or "true").references)
        return {
            "id": n.id,
            "kind": "assert",
            "description": " ".join(" ".join(r.split()) for r in n.rules)
            or "Named by the gold paths; the rules planner found no check to put here.",
            "reads": list(dict.fromkeys(r if r.startswith("input.") else r.split(".", 1)[0] for r in refs)),
            "expr": n.expr or "true",
        }

    def gate(self, chain: list[_Node]) -> None:
        if not self.unsure:
            return
        for t in chain:
            if t.kind != "tool" or not t.tool or t.tool.split("_")[0].lower() in READ_ONLY_VERBS:
                continue
            # The last decision before the tool that feeds it (a closed-choice field
            # beside an argument): what the side effect hangs on.
            feeding = [
                n
                for n in chain[: chain.index(t)]
                if n.kind == "generate"
                and set(n.writes) & set(t.args.values())
                and any(self.closed(f) for f in n.writes)
            ]
            if feeding:
                feeding[-1].gated = True
        # A node that gold paths show handing a case to the unsure end.
        ids = [n.id for n in chain]
        for c in self.spec.gold:
            if c.path and c.end == self.unsure and c.path[-1] == self.unsure:
                known = [p for p in c.path[:-1] if p in ids]
                if known:
                    node = chain[ids.index(known[-1])]
                    # A classification is drawn three times (a split vote goes to a
                    # person); an extraction that fails its checks takes on_fail.
                    if node.kind == "generate" and node.closed:
                        node.gated = True
                    elif node.kind == "generate":
                        node.on_fail = self.unsure

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


def _similar(slot: str, name: str) -> int:
    """How alike a node id from gold and a field or tool name are: shared words, else a
    shared 5-letter stem (`prioritise` / `priority`)."""
    a, b = slot.lower(), name.lower()
    if a == b:
        return 3
    if set(a.split("_")) & set(b.split("_")):
        return 2
    return 1 if len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5] else 0


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
