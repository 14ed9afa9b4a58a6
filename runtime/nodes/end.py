"""`end`: stop the run and return its output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext

if TYPE_CHECKING:
    from runtime.pack.model import Node


class EndKind:
    name = "end"
    keys = frozenset({"output"})
    drawing = NodeDrawing(shape="stadium", css_class="node-end", label="end", mermaid=('(["', '"])'))
    terminal = True
    can_fail = False
    waits = False
    asks_model = False

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        if "output" in spec:
            node.output = loader.field_list(spec["output"], "nodes", node.id, "output")

    def run(self, node: Node, walk: RunContext) -> Outcome:
        return Outcome("end")
