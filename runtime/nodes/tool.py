"""`tool`: call a function the host registered, through the run's one call path
(Walk.call_tool: schemas, availability, idempotency key, journal). No retry ladder: a
repeated call is a side effect done twice. The result is journaled the moment the call
returns, so a resumed run replays it (docs/invariants.md, 4). A pack can only name tools; the host
decides which exist (docs/invariants.md, 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.errors import OutputRejected
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, covered
from runtime.templates import lookup
from runtime.verify import verify_answer

if TYPE_CHECKING:
    from runtime.pack.model import Node


class ToolKind:
    name = "tool"
    keys = frozenset({"tool", "args"})
    drawing = NodeDrawing(shape="barred", css_class="node-tool", label="tool", mermaid=('[["', '"]]'))
    terminal = False
    can_fail = True
    waits = False
    asks_model = False

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        at = ("nodes", node.id)
        tool = spec.get("tool")
        if not isinstance(tool, str) or not tool:
            loader.error(f"tool node '{node.id}' needs 'tool', the name of a host-registered function", *at)
        else:
            node.tool = tool
        args = spec.get("args", {})
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            loader.error(f"tool node '{node.id}': 'args' maps argument names to field paths it reads", *at, "args")
            args = {}
        for name, path in args.items():
            if not covered(path, node.reads):
                loader.error(
                    f"tool node '{node.id}': argument '{name}' uses '{path}', which is not in its reads",
                    *at,
                    "args",
                    name,
                )
        node.args = dict(args)
        node.schema, node.validator = loader.schema(node.id, required=False)

    def run(self, node: Node, walk: RunContext) -> Outcome:
        assert node.tool is not None
        args = {name: lookup(walk.view(), tuple(path.split("."))) for name, path in node.args.items()}
        called = walk.call_tool(node, node.tool, args)
        if not called.ok:
            return Outcome("fail", reason=called.reason or f"tool '{node.tool}' failed ({called.kind})")
        try:
            writes = verify_answer(node, called.result, walk.state, walk.input)
        except OutputRejected as exc:
            return Outcome("fail", reason=f"tool '{node.tool}' returned a bad result: {exc.reason}")
        return Outcome("ok", writes=writes)
