"""The rules planner's names (docs/compiler.md, "The rules planner", 6): node ids from the
gold `path` entries (by shared word, then by position), check nodes and re-reads gold
paths name, and ids from fields where gold names none."""

from __future__ import annotations

import itertools
import re

from compiler.plan import all_of
from compiler.planners.rules_base import CHECK_WORDS, NODE_ID, ChainNode, Fields, similar
from runtime import compile_expr


class Naming(Fields):
    """Gives chain nodes their ids (a part of the rules planner's builder)."""

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

    def name(self, chain: list[ChainNode], ends: set[str]) -> list[ChainNode]:
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
                    score = max((similar(s, f) for f in names), default=0)
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
                chain.insert(after + 1, ChainNode(id=s, kind="assert", expr="true", rules=[]))
        return chain

    def matches_field(self, slot: str, chain: list[ChainNode]) -> bool:
        return any(similar(slot, f) for n in chain for f in ([n.tool or ""] if n.kind == "tool" else n.writes))

    def merge(self, src: ChainNode, dst: ChainNode) -> None:
        dst.writes = [f for f in self.spec.outputs if f in dst.writes or f in src.writes]
        dst.asserts += src.asserts
        dst.rules += src.rules

    def place_check(self, chain: list[ChainNode], slot: str, slots: list[str]) -> list[ChainNode]:
        """An assert node named `slot` holding the rules whose fields are written before
        it (taken off the generate nodes that held them)."""
        order = {s: k for k, s in enumerate(slots)}
        named_before = [i for i, n in enumerate(chain) if n.id in order and order[n.id] < order[slot]]
        at = (named_before[-1] + 1) if named_before else len(chain)
        # (holder, expr, text) for every rule placed before the slot.
        found: list[tuple[ChainNode, str, str]] = []
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
        expr = all_of(exprs) or "true"
        chain.insert(at, ChainNode(id=slot, kind="assert", expr=expr, rules=texts))
        return chain

    def place_detour(self, chain: list[ChainNode], slot: str, a: str, b: str) -> None:
        ids = [n.id for n in chain]
        if a in ids and chain[ids.index(a)].kind == "assert":
            check = chain[ids.index(a)]
            # Re-read what the check reads, told to get it right: two-stage, same check.
            refs = {r.split(".", 1)[0] for r in compile_expr(check.expr or "true").references}
            writers = [n for n in chain if n.kind == "generate" and set(n.writes) & refs]
            writes = [f for f in self.spec.outputs if any(f in w.writes for w in writers)]
            if writes:
                node = ChainNode(
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
        chain.append(ChainNode(id=slot, kind="assert", expr="true", rules=[], detour=(a, b)))

    def default_id(self, n: ChainNode) -> str:
        if n.kind == "tool":
            return n.tool or "tool"
        if n.kind == "assert":
            return "check"
        first = NODE_ID.sub("_", n.writes[0].lower()).strip("_") or "field"
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
