"""`end`: stop the run and return its output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.nodes.base import Outcome

if TYPE_CHECKING:
    from runtime.pack.load import NodeLoader
    from runtime.pack.model import Node
    from runtime.walker import Walk


class EndKind:
    name = "end"
    keys = frozenset({"output"})

    def load(self, node: Node, spec: dict[str, Any], loader: NodeLoader) -> None:
        if "output" in spec:
            node.output = loader.field_list(spec["output"], "nodes", node.id, "output")

    def run(self, node: Node, walk: Walk) -> Outcome:
        return Outcome("end")
