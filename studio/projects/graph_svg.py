"""The one drawing of a pack's graph, for the project overview and the eval result
pages: nodes in layers by breadth-first distance from the entry, edges as curves with
their labels; optionally nodes filled by their share of blamed failures (blame) and
edges as thick as the runs that took them, untaken ones marked (coverage).

Only geometry and the numbers are computed here; the template
(projects/_graph_svg.html) writes the SVG with autoescaping on, so node ids and `when`
sources are escaped like any text. How a node of each kind is drawn (its outline, CSS
class and caption) comes from the kind's own module (`runtime.drawing_for`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from runtime import NodeDrawing, Pack, drawing_for
from studio.projects.graph_geometry import Box, Point, bezier, boxes_overlap, path_crosses_box
from studio.projects.graph_layers import layers

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
        d = min(10, self.w / 6)
        return f"M{self.x + d:g},{self.y:g} v{self.h:g} M{self.right - d:g},{self.y:g} v{self.h:g}"

    @property
    def corner(self) -> float:
        return min(24, self.h / 2)

    @property
    def hexagon(self) -> str:
        x, y, w, h, d = self.x, self.y, self.w, self.h, min(16, self.w / 4)
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
    curve: tuple[Point, Point, Point, Point] = ((0, 0), (0, 0), (0, 0), (0, 0))  # the cubic's four points
    number: int = 0  # > 0: drawn as this number, its text listed under the drawing (no room for the text)
    box: Box | None = None  # where the label is written: (x, y, width, height)

    @property
    def untaken(self) -> bool:
        return self.count == 0

    @property
    def dashed(self) -> bool:
        return self.kind != "next" or self.untaken

    @property
    def dash(self) -> str:
        """Untaken edges are dotted; on_fail and on_unsure dashed, each its own way, taken
        or not, so a taken on_fail edge never reads as an untaken one."""
        if self.untaken:
            return "2 5"
        return {"on_fail": "9 4", "on_unsure": "9 3 2 3"}.get(self.kind, "")

    @property
    def written(self) -> str:
        """What the drawing writes on the edge: its text, or its number when the text had no room."""
        return str(self.number) if self.number else self.text

    @property
    def text_x(self) -> float:
        return self.box[0] + self.box[2] / 2 if self.box else self.label_x

    @property
    def text_y(self) -> float:
        return self.box[1] + self.box[3] - 4 if self.box else self.label_y

    @property
    def text_w(self) -> float:
        return len(self.written) * CHAR_W

    def points(self, steps: int = 48) -> list[Point]:
        """The curve as a polyline, for the layout checks."""
        return [bezier(self.curve, i / steps) for i in range(steps + 1)]

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
    legend: list[LegendItem] = field(default_factory=list)
    legend_y: float = 0.0

    @property
    def numbered(self) -> list[DrawnEdge]:
        return sorted((e for e in self.edges if e.number), key=lambda e: e.number)


@dataclass
class LegendItem:
    """One line of the legend under the drawing: a sample of a style and what it means."""

    key: str  # next | on_fail | on_unsure | untaken | thick | entry | heat | number | node-<kind>
    text: str
    x: float = 0.0
    y: float = 0.0
    edge: DrawnEdge | None = None  # a numbered edge's entry
    node: DrawnNode | None = None  # a node kind's sample

    @property
    def line(self) -> str:
        return f"M{self.x:g},{self.y - 4:g} h34"


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
    _place_labels(drawing)
    used = sorted({n.kind for n in drawing.nodes})
    _legend(drawing, [(kind, drawing_for(kind)) for kind in used], entry=any(n.entry for n in drawing.nodes))
    return drawing


# An edge label is 12px monospace (studio.css, svg.graph .label text): a character is
# about 0.6 em wide. The drawing is shown at its own size, so 12px is what is read.
LABEL_FONT_PX = 12
CHAR_W, LINE_H = 0.61 * LABEL_FONT_PX, 15  # a label's character width and line height
LABEL_PAD = 3  # room around a label's text inside its box
# Where along its curve a label may sit, best first: the middle, then out towards the ends.
ALONG = (0.5, 0.42, 0.58, 0.34, 0.66, 0.74, 0.26, 0.8, 0.2, 0.86, 0.14)
KIND_MEANING = {
    "generate": "a model call, its answer checked against the node's grammar",
    "assert": "a check on state, no model call",
    "tool": "a call to a tool the host registered",
    "human": "waits for a person's answer",
    "end": "the run ends here",
}
EDGE_MEANING = {
    "next": "next: the walk goes on when its condition (the label) holds",
    "on_fail": "on_fail: taken when the node's answer is rejected",
    "on_unsure": "on_unsure: taken when the node's samples disagree",
}


def layout_problems(drawing: Drawing) -> list[str]:
    """What the layout check finds wrong: two label boxes that intersect, or a label box
    that an edge other than its own crosses. Empty for a readable drawing."""
    problems: list[str] = []
    labelled = [e for e in drawing.edges if e.box is not None]
    for a, b in itertools.combinations(labelled, 2):
        if boxes_overlap(a.box, b.box):  # type: ignore[arg-type]
            problems.append(f"labels of edges {a.index} and {b.index} overlap")
    for e in labelled:
        for other in drawing.edges:
            if other is not e and path_crosses_box(other.points(), e.box):  # type: ignore[arg-type]
                problems.append(f"edge {other.index} crosses the label of edge {e.index}")
    return problems


def _place_labels(drawing: Drawing) -> None:
    """Write each edge's text where it touches no other label, no node and no other edge:
    at the first free spot along its own curve (on it, or just beside it). An edge whose
    text fits nowhere is numbered instead: the number is placed the same way, and the
    text is listed under the drawing."""
    obstacles: list[Box] = [(n.x - 3, n.y - 3, n.w + 6, n.h + 6) for n in drawing.nodes]
    obstacles += [(n.cx - 32, n.entry_y - 12, 64, 16) for n in drawing.nodes if n.entry]
    paths = {id(e): e.points() for e in drawing.edges}
    numbered = 0
    for edge in drawing.edges:
        if not edge.text:
            continue
        for number in (0, numbered + 1):
            edge.number = number
            box = _free_spot(edge, drawing, obstacles, paths)
            if box is not None:
                break
        else:  # nowhere free even for a number: the layout check will say so
            box = _label_box(edge, bezier(edge.curve, 0.5), 0)
        numbered = max(numbered, edge.number)
        edge.box = box
        edge.label_x, edge.label_y = round(box[0] + box[2] / 2, 1), round(box[1] + box[3] - 4, 1)
        obstacles.append((box[0] - 2, box[1] - 2, box[2] + 4, box[3] + 4))


def _label_box(edge: DrawnEdge, at: Point, side: int) -> Box:
    w, h = edge.text_w + 2 * LABEL_PAD, LINE_H + 2
    x = at[0] - w / 2 + side * (w / 2 + 6)
    return (round(x, 1), round(at[1] - h / 2, 1), round(w, 1), h)


def _free_spot(edge: DrawnEdge, drawing: Drawing, obstacles: list[Box], paths: dict[int, list[Point]]) -> Box | None:
    for t in ALONG:
        at = bezier(edge.curve, t)
        for side in (0, 1, -1):
            box = _label_box(edge, at, side)
            if box[0] < 2 or box[1] < 2 or box[0] + box[2] > drawing.width - 2 or box[1] + box[3] > drawing.height - 2:
                continue
            if any(boxes_overlap(box, o) for o in obstacles):
                continue
            if any(path_crosses_box(points, box) for key, points in paths.items() if key != id(edge)):
                continue
            return box
    return None


def _legend(drawing: Drawing, kinds: list[tuple[str, NodeDrawing]], entry: bool) -> None:
    """The legend under the drawing: every style the drawing uses, then the numbered
    edges' texts. Grows the drawing to hold it."""
    items: list[LegendItem] = []
    for kind, look in kinds:
        items.append(LegendItem(f"node-{kind}", f"{look.label}: {KIND_MEANING.get(kind, 'a ' + kind + ' node')}"))
    if entry:
        items.append(LegendItem("entry", "entry: where every run starts"))
    if drawing.heat:
        items.append(LegendItem("heat", "fill: share of the failures blamed on the node (darker: more)"))
    used = {e.kind for e in drawing.edges}
    for kind in ("next", "on_fail", "on_unsure"):
        if kind in used:
            items.append(LegendItem(kind, EDGE_MEANING[kind]))
    if drawing.counted:
        items.append(LegendItem("thick", "thicker: taken by more runs; ×n: taken by n runs"))
        if any(e.untaken for e in drawing.edges):
            items.append(LegendItem("untaken", "untaken: no run took this edge"))
    if drawing.numbered:
        items.append(LegendItem("number", "n: an edge whose label had no room; its text is listed below"))
    for e in drawing.numbered:
        full = e.label if e.count is None else e.text.replace(e.short_label, e.label)
        items.append(LegendItem("edge", f"{e.source} → {e.target}: {full}", edge=e))
    bottom = max([n.bottom for n in drawing.nodes] + [e.box[1] + e.box[3] for e in drawing.edges if e.box])
    bottom = max([bottom] + [y for e in drawing.edges for _, y in e.points(16)])
    drawing.legend_y = bottom + 28
    y = drawing.legend_y + 16
    looks = dict(kinds)
    for item in items:
        item.x, item.y = MARGIN, y
        if item.key.startswith("node-"):
            kind = item.key[5:]
            item.node = DrawnNode(kind, kind, MARGIN, y - 12, w=34, h=16, look=looks[kind])
        elif item.key == "heat":
            item.node = DrawnNode("", "", MARGIN, y - 12, w=34, h=16, fill=heat_colour(0.6))
        y += 20
        drawing.width = max(drawing.width, MARGIN * 2 + 46 + len(item.text) * CHAR_W)
    drawing.legend = items
    drawing.height = y + MARGIN / 2


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
    curve = ((x1, y1), c1, c2, (x2, y2))
    mx, my = bezier(curve, t)
    return DrawnEdge(a.id, b.id, kind, label, d, round(mx, 1), round(my, 1), curve=curve)
