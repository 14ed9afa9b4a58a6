"""Lay a pack's graph out for drawing as SVG: nodes in layers by breadth-first distance
from the entry, edges as curves with their labels.

Only geometry is computed here; the template (projects/_graph.svg.html) writes the
SVG with autoescaping on, so node ids and `when` sources are escaped like any text."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from runtime import Pack

NODE_W, NODE_H = 156, 48
H_GAP, V_GAP = 44, 110
MARGIN = 40
LABEL_MAX = 26  # characters; about the room between two nodes of a layer

KINDS = ("generate", "assert", "tool", "human", "end")


@dataclass
class DrawnNode:
    id: str
    kind: str
    x: float
    y: float
    entry: bool = False
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    w: float = NODE_W
    h: float = NODE_H

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def shape(self) -> str:
        return self.kind if self.kind in KINDS else "other"

    @property
    def rx(self) -> float:
        return self.w / 2

    @property
    def ry(self) -> float:
        return self.h / 2

    @property
    def id_y(self) -> float:
        return self.cy - 2

    @property
    def kind_y(self) -> float:
        return self.cy + 13

    @property
    def entry_y(self) -> float:
        return self.y - 8

    @property
    def inset(self) -> tuple[float, float, float, float]:
        return self.x + 3, self.y + 3, self.w - 6, self.h - 6

    @property
    def bars(self) -> str:
        return f"M{self.x + 10:g},{self.y:g} v{self.h:g} M{self.right - 10:g},{self.y:g} v{self.h:g}"

    @property
    def hexagon(self) -> str:
        x, y, w, h, d = self.x, self.y, self.w, self.h, 16
        points = [(x + d, y), (x + w - d, y), (x + w, y + h / 2), (x + w - d, y + h), (x + d, y + h), (x, y + h / 2)]
        return " ".join(f"{px:g},{py:g}" for px, py in points)


@dataclass
class DrawnEdge:
    source: str
    target: str
    kind: str  # next | on_fail | on_unsure
    label: str
    d: str  # the SVG path
    label_x: float
    label_y: float

    @property
    def dashed(self) -> bool:
        return self.kind != "next"

    @property
    def short_label(self) -> str:
        return self.label if len(self.label) <= LABEL_MAX else self.label[: LABEL_MAX - 1] + "…"


@dataclass
class Drawing:
    width: float
    height: float
    nodes: list[DrawnNode] = field(default_factory=list)
    edges: list[DrawnEdge] = field(default_factory=list)


def layers(pack: Pack) -> list[list[str]]:
    """Breadth-first layers from the entry over every edge kind; nodes the entry cannot
    reach (a pack that loads has none) go in one last layer."""
    depth: dict[str, int] = {}
    order: list[str] = []
    if pack.entry in pack.nodes:
        depth[pack.entry] = 0
        queue = deque([pack.entry])
        while queue:
            node = queue.popleft()
            order.append(node)
            for edge in pack.edges:
                if edge.source == node and edge.target in pack.nodes and edge.target not in depth:
                    depth[edge.target] = depth[node] + 1
                    queue.append(edge.target)
    last = max(depth.values(), default=-1) + 1
    for node in pack.nodes:
        if node not in depth:
            depth[node] = last
            order.append(node)
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in order:
        out[depth[node]].append(node)
    _untangle(out, pack)
    return out


def _untangle(rows: list[list[str]], pack: Pack) -> None:
    """One downward pass of the barycentre heuristic: order each layer by the mean
    position of its parents in the layer above, which removes most crossings."""
    for i in range(1, len(rows)):
        above = {node: k for k, node in enumerate(rows[i - 1])}
        first_seen = {node: k for k, node in enumerate(rows[i])}

        def key(node: str) -> tuple[float, int]:
            parents = [above[e.source] for e in pack.edges if e.target == node and e.source in above]
            return (sum(parents) / len(parents) if parents else float(len(above)), first_seen[node])

        rows[i].sort(key=key)


def draw(pack: Pack) -> Drawing:
    rows = layers(pack)
    widest = max((len(r) for r in rows), default=1)
    width = MARGIN * 2 + widest * NODE_W + (widest - 1) * H_GAP + 120  # room for back edges on the right
    height = MARGIN * 3 + len(rows) * NODE_H + max(len(rows) - 1, 0) * V_GAP  # room for arcs below
    drawing = Drawing(width, height)
    placed: dict[str, DrawnNode] = {}
    level: dict[str, int] = {}
    for i, row in enumerate(rows):
        row_width = len(row) * NODE_W + (len(row) - 1) * H_GAP
        left = (width - 120 - row_width) / 2
        for k, node_id in enumerate(row):
            node = pack.nodes[node_id]
            drawn = DrawnNode(
                node_id,
                node.kind,
                left + k * (NODE_W + H_GAP),
                MARGIN + i * (NODE_H + V_GAP),
                entry=node_id == pack.entry,
                reads=node.reads,
                writes=node.writes,
            )
            placed[node_id] = drawn
            level[node_id] = i
            drawing.nodes.append(drawn)
    seen_pairs: dict[frozenset[str], int] = {}
    fanned: dict[str, int] = {}
    linked = {(e.source, e.target) for e in pack.edges}
    for edge in pack.edges:
        a, b = placed.get(edge.source), placed.get(edge.target)
        if a is None or b is None:
            continue
        nth = seen_pairs.get(frozenset((a.id, b.id)), 0)
        seen_pairs[frozenset((a.id, b.id))] = nth + 1
        fan = fanned.get(a.id, 0)
        fanned[a.id] = fan + 1
        reverse = (b.id, a.id) in linked
        drawing.edges.append(_route(a, b, level[a.id], level[b.id], nth, fan, reverse, edge.kind, edge.label))
    _part_labels(drawing.edges)
    return drawing


CHAR_W, LINE_H = 6.7, 14  # an 11px monospace label's character width and line height


def _part_labels(edges: list[DrawnEdge]) -> None:
    """Nudge a label down, a line at a time, while it overlaps one placed before it."""
    placed: list[tuple[float, float, float]] = []  # (centre x, y, half width)
    for edge in edges:
        if not edge.label:
            continue
        half = len(edge.short_label) * CHAR_W / 2
        for _ in range(4):
            if not any(abs(edge.label_x - x) < half + w and abs(edge.label_y - y) < LINE_H for x, y, w in placed):
                break
            edge.label_y += LINE_H
        placed.append((edge.label_x, edge.label_y, half))


def _route(
    a: DrawnNode, b: DrawnNode, la: int, lb: int, nth: int, fan: int, reverse: bool, kind: str, label: str
) -> DrawnEdge:
    """A cubic curve from a to b. `nth` counts earlier edges between the same two nodes
    (drawn further out, so they stay apart); `fan` counts a's earlier edges (their
    labels are staggered, so siblings' labels do not overlap); `reverse` says an edge
    b -> a exists too (a loop, so an edge back up goes around the side)."""
    shift = nth * 34
    t = 0.5
    if lb > la:  # downwards: bottom of a to top of b
        x1, y1, x2, y2 = a.cx + shift / 2, a.bottom, b.cx + shift / 2, b.y - 2
        bend = (y2 - y1) / 2
        c1, c2 = (x1 + shift, y1 + bend), (x2 + shift, y2 - bend)
        t = 0.8 if fan % 2 == 0 else 0.68  # near the target, where fanned-out edges have parted
    elif a is b:  # a loop on the right side
        x1, y1, x2, y2 = a.right, a.cy - 10, a.right, a.cy + 10
        c1, c2 = (x1 + 60 + shift, y1 - 30), (x2 + 60 + shift, y2 + 30)
    elif lb == la:  # along a layer: dip below it, from a's bottom up into b's bottom
        step = 10 if b.cx > a.cx else -10
        x1, y1, x2, y2 = a.cx + step, a.bottom, b.cx - step, b.bottom + 2
        depth = 24 + 0.12 * abs(b.cx - a.cx) + 0.7 * shift  # farther apart: deeper, so labels part
        c1, c2 = (x1, y1 + depth), (x2, y2 + depth)
    elif la - lb == 1 and not reverse:  # one layer back up: from a's top to b's bottom
        x1, y1, x2, y2 = a.cx - 16 - shift / 2, a.y, b.cx + 16 + shift / 2, b.bottom + 2
        bend = (y1 - y2) / 2
        c1, c2 = (x1 - shift, y1 - bend), (x2 - shift, y2 + bend)
        t = 0.3  # low, below the labels of edges that dip along the layer above
    else:  # further back up, or closing a loop: leave on the right, come back in on the right
        x1, y1, x2, y2 = a.right, a.cy, b.right + 2, b.cy
        out = 70 + shift + 18 * abs(la - lb)
        c1, c2 = (max(x1, x2) + out, y1), (max(x1, x2) + out, y2)
    d = f"M{x1:g},{y1:g} C{c1[0]:g},{c1[1]:g} {c2[0]:g},{c2[1]:g} {x2:g},{y2:g}"
    weights = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3)
    mx = sum(w * x for w, x in zip(weights, (x1, c1[0], c2[0], x2), strict=True))
    my = sum(w * y for w, y in zip(weights, (y1, c1[1], c2[1], y2), strict=True))
    return DrawnEdge(a.id, b.id, kind, label, d, round(mx, 1), round(my, 1))
