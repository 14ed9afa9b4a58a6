"""The rules planner's routing (docs/compiler.md, "The rules planner", 5): where each gold
case leaves the chain, and one or two tests on fields written so far that tell the cases
leaving for each end apart from the rest."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from compiler.planners.rules_base import LABEL, NEXT, ChainNode, Fields, count, holds, leaves, literal
from compiler.spec import GoldCase
from runtime import compile_expr


class Routing(Fields):
    """Routes the chain from gold (a part of the rules planner's builder)."""

    def reached(self, case: GoldCase, chain: list[ChainNode]) -> int:
        """How far along the chain a case goes: the furthest node writing a field its
        expected holds, or named in its path."""
        at = 0
        for i, n in enumerate(chain):
            if set(n.writes) & set(case.expected) or (case.path and n.id in case.path):
                at = i
        if chain and chain[at].kind == "choose_tool" and at + 1 < len(chain):
            at += 1  # a tool loop always goes on to its final answer
        while at + 1 < len(chain) and chain[at + 1].kind == "assert":
            at += 1  # checks come before leaving
        return at

    def routes(self, chain: list[ChainNode]) -> dict[int, list[tuple[str, str | None]]]:
        """Per chain index: its `to` edges (target, when), in order."""
        reach = {c.id: self.reached(c, chain) for c in self.cases}
        out: dict[int, list[tuple[str, str | None]]] = {}
        for i, n in enumerate(chain):
            here = [c for c in self.cases if reach[c.id] == i]
            onward = [c for c in self.cases if reach[c.id] > i]
            ends_later = {c.end for c in onward}
            nxt = chain[i + 1].id if i + 1 < len(chain) else None
            if n.kind == "choose_tool":
                out[i] = [(nxt if nxt is not None else self.default_end(here), None)]
                continue
            if n.kind == "tool":
                # A tool's leaving cases are the ones it fails on.
                leaving = sorted({c.end for c in here if c.end}, key=lambda e: count(here, e), reverse=True)
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
                    certain = [c for c in groups[g] if leaves(c, n.id, g)]
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
        return "done"  # gold names no end: the happy path ends at `done`; the unsure end is for failures

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
                t_members = {c.id for c in members if holds(compiled, c.expected)}
                t_others = {c.id for c in others if name in c.expected and holds(compiled, c.expected)}
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
        labels = all(isinstance(v, str) and LABEL.fullmatch(v) for v in vals)
        if self.closed(name) or labels:
            distinct = sorted({literal(v) for v in vals})
            if len(distinct) == 1:
                out.append(f"{name} == {distinct[0]}")
            elif not self.closed(name) or len(distinct) < len(self.values(name)):
                out.append(f"{name} in [{', '.join(distinct)}]")
        if self.numeric(name) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            lo, hi = min(vals), max(vals)
            out.append(f"{name} != null and {name} <= {literal(hi)}")
            out.append(f"{name} != null and {name} >= {literal(lo)}")
        return out
