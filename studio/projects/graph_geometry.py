"""Plane geometry for the graph drawing (studio.projects.graph_svg): points, boxes, cubic
Bezier points, and whether a box overlaps another or a polyline passes through it (the
checks the label placement and the layout's self-test use)."""

from __future__ import annotations

import itertools

Point = tuple[float, float]
Box = tuple[float, float, float, float]  # x, y, width, height


def bezier(curve: tuple[Point, Point, Point, Point], t: float) -> Point:
    weights = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3)
    return (
        sum(w * p[0] for w, p in zip(weights, curve, strict=True)),
        sum(w * p[1] for w, p in zip(weights, curve, strict=True)),
    )


def boxes_overlap(a: Box, b: Box) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def segment_crosses_box(p: Point, q: Point, box: Box) -> bool:
    """Whether the segment p-q passes through the box (Liang-Barsky clipping)."""
    x0, y0 = p
    dx, dy = q[0] - p[0], q[1] - p[1]
    low, high = 0.0, 1.0
    for step, room in (
        (-dx, x0 - box[0]),
        (dx, box[0] + box[2] - x0),
        (-dy, y0 - box[1]),
        (dy, box[1] + box[3] - y0),
    ):
        if step == 0:
            if room < 0:
                return False
            continue
        t = room / step
        if step < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


def path_crosses_box(points: list[Point], box: Box) -> bool:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if not boxes_overlap((min(xs), min(ys), max(xs) - min(xs) + 1e-9, max(ys) - min(ys) + 1e-9), box):
        return False  # the path's own bounds miss the box: most paths, checked in one step
    return any(segment_crosses_box(p, q, box) for p, q in itertools.pairwise(points))
