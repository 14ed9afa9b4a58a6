"""`assert`: branch on a deterministic expression over state. False takes on_fail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.errors import ExprError
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, covered

if TYPE_CHECKING:
    from runtime.pack.model import Node


class AssertKind:
    name = "assert"
    keys = frozenset({"expr"})
    drawing = NodeDrawing(shape="hexagon", css_class="node-assert", label="assert", mermaid=('{"', '"}'))
    terminal = False
    can_fail = True
    waits = False
    asks_model = False

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        at = ("nodes", node.id)
        if "expr" not in spec:
            loader.error(f"assert node '{node.id}' needs 'expr', the condition to check", *at)
            return
        if node.writes:
            loader.error(f"assert node '{node.id}' cannot write fields; remove 'writes'", *at, "writes")
        node.check = loader.expr(spec["expr"], *at, "expr")
        if node.check is not None:
            for ref in sorted(node.check.references):
                if not covered(ref, node.reads):
                    loader.error(
                        f"assert node '{node.id}': expr uses '{ref}', which is not in its reads; add it", *at, "expr"
                    )

    def run(self, node: Node, walk: RunContext) -> Outcome:
        assert node.check is not None
        try:
            ok = node.check.truthy(walk.view())
        except ExprError as exc:
            return Outcome("fail", reason=f"assert `{node.check.source}` could not be evaluated: {exc}")
        if ok:
            return Outcome("ok")
        return Outcome("fail", reason=f"assert `{node.check.source}` is false")
