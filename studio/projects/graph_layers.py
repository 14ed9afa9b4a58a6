"""Which layer of the graph drawing each node goes in (studio.projects.graph_svg):
breadth-first from the entry, then each layer ordered so that few edges cross."""

from __future__ import annotations

import functools
from collections import deque

from runtime import Pack


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
