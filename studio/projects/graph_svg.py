"""The one drawing of a pack's graph, for the project overview and the eval result
pages: nodes in layers by breadth-first distance from the entry, edges as curves with
their labels; optionally nodes filled by their share of blamed failures (blame) and
edges as thick as the runs that took them, untaken ones marked (coverage).

Only geometry and the numbers are computed here; the template
(projects/_graph_svg.html) writes the SVG with autoescaping on, so node ids and `when`
sources are escaped like any text. How a node of each kind is drawn (its outline, CSS
class and caption) comes from the kind's own module (`runtime.drawing_for`)."""

from __future__ import annotations

import functools
import itertools
from collections import deque
from dataclasses import dataclass, field

from runtime import NodeDrawing, Pack, drawing_for

NODE_W, NODE_H = 156, 48
H_GAP, V_GAP = 44, 110
MARGIN = 40
LABEL_MAX = 26  # characters; about the room between two nodes of a layer

EDGE_WIDTH = 1.6
THICKEST = 5.0  # added to EDGE_WIDTH for an edge every run took
DARK_FROM = 0.45  # a blamed share from which a node's fill is dark enough for white text


def heat_colour(share: float) -> str:
    """White-ish at 0, through amber, to deep red at 1: heat that reads in greyscale too."""
    stops = [(0.0, (248, 249, 251)), (0.25, (254, 228, 226)), (0.5, (249, 112, 102)), (1.0, (145, 24, 18))]
    share = min(max(share, 0.0), 1.0)
    for (s0, c0), (s1, c1) in itertools.pairwise(stops):
        if share <= s1:
            t = (share - s0) / (s1 - s0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1, strict=True))
    return "#911812"


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
    look: NodeDrawing = field(default_factory=lambda: drawing_for(""))
    fill: str | None = None  # a heat colour (blame); None: the kind's colours, from the stylesheet
    on_dark: bool = False
    note: str = ""

    @property
    def shape(self) -> str:
        return self.look.shape

    @property
    def css_class(self) -> str:
        return "heat" if self.fill is not None else self.look.css_class

    @property
    def caption(self) -> str:
        return self.note or self.look.label

    @property
    def tip(self) -> str:
        text = f"{self.id} ({self.kind})" + (f" · {self.note}" if self.note else "")
        if self.reads:
            text += "\nreads: " + ", ".join(self.reads)
        if self.writes:
            text += "\nwrites: " + ", ".join(self.writes)
        return text

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
    index: int = -1  # the pack edge's index (what traces and coverage counts name)
    count: int | None = None  # runs that took it (coverage); None: not counted
    width: float = EDGE_WIDTH

    @property
    def untaken(self) -> bool:
        return self.count == 0

    @property
    def dashed(self) -> bool:
        return self.kind != "next" or self.untaken

    @property
    def marker(self) -> str:
        return "untaken" if self.untaken else self.kind

    @property
    def short_label(self) -> str:
        return self.label if len(self.label) <= LABEL_MAX else self.label[: LABEL_MAX - 1] + "…"

    @property
    def text(self) -> str:
        """What is written on the edge: its `when` (shortened), after its count when counted."""
        if self.count is None:
            return self.short_label
        counted = "untaken" if self.untaken else f"×{self.count}"
        return counted + (f" · {self.short_label}" if self.label else "")

    @property
    def tip(self) -> str:
        text = f"{self.source} → {self.target}" + (f": {self.label}" if self.label else "")
        if self.count is not None:
            text += f" · taken by {self.count} run{'s' if self.count != 1 else ''}" if self.count else " · never taken"
        return text


@dataclass
class Drawing:
    width: float
    height: float
    nodes: list[DrawnNode] = field(default_factory=list)
    edges: list[DrawnEdge] = field(default_factory=list)
    label: str = ""  # the SVG's title, read by screen readers
    heat: bool = False  # nodes filled by their share of blamed failures
    counted: bool = False  # edges drawn by the runs that took them


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
        rows[i].sort(key=functools.partial(_barycentre, pack, above=above, first_seen=first_seen))


def _barycentre(pack: Pack, node: str, *, above: dict[str, int], first_seen: dict[str, int]) -> tuple[float, int]:
    parents = [above[e.source] for e in pack.edges if e.target == node and e.source in above]
    return (sum(parents) / len(parents) if parents else float(len(above)), first_seen[node])


def draw(
    pack: Pack,
    *,
    label: str = "",
    shares: dict[str, float] | None = None,
    notes: dict[str, str] | None = None,
    edge_counts: dict[int, int] | None = None,
    runs: int = 0,
) -> Drawing:
    """The pack's graph laid out. With `shares` (node id -> share of blamed failures),
    nodes are filled by heat and captioned with `notes`; with `edge_counts` (edge index ->
    runs that took it, out of `runs`), edges are as thick as their share of runs and an
    edge no run took is marked untaken."""
    rows = layers(pack)
    widest = max((len(r) for r in rows), default=1)
    width = MARGIN * 2 + widest * NODE_W + (widest - 1) * H_GAP + 120  # room for back edges on the right
    height = MARGIN * 3 + len(rows) * NODE_H + max(len(rows) - 1, 0) * V_GAP  # room for arcs below
    drawing = Drawing(width, height, label=label, heat=shares is not None, counted=edge_counts is not None)
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
                look=drawing_for(node.kind),
                note=(notes or {}).get(node_id, ""),
            )
            if shares is not None:
                share = shares.get(node_id, 0.0)
                drawn.fill, drawn.on_dark = heat_colour(share), share > DARK_FROM
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
        drawn_edge = _route(a, b, level[a.id], level[b.id], nth, fan, reverse, edge.kind, edge.label)
        drawn_edge.index = edge.index
        if edge_counts is not None:
            drawn_edge.count = edge_counts.get(edge.index, 0)
            drawn_edge.width = EDGE_WIDTH + THICKEST * (drawn_edge.count / runs if runs else 0)
        drawing.edges.append(drawn_edge)
    _part_labels(drawing.edges)
    return drawing


CHAR_W, LINE_H = 6.7, 14  # an 11px monospace label's character width and line height


def _part_labels(edges: list[DrawnEdge]) -> None:
    """Nudge a label down, a line at a time, while it overlaps one placed before it."""
    placed: list[tuple[float, float, float]] = []  # (centre x, y, half width)
    for edge in edges:
        if not edge.text:
            continue
        half = len(edge.text) * CHAR_W / 2
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
