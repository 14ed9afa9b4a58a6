"""`tool`: call a function the host registered. No retry ladder: a repeated call is a
side effect done twice. The result is journaled the moment the call returns, so a
resumed run replays it (invariant 4). A pack can only name tools; the host decides
which exist (invariant 5)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from runtime.errors import OutputRejected
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext, covered
from runtime.prompt import lookup
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
        recorded = walk.pending_tools.pop((node.id, walk.step), None)
        if recorded is not None:
            result = recorded["result"]
        else:
            fn = walk.tools.get(node.tool)
            if fn is None:  # load_pack(tools=...) refuses this; a host that skipped it lands here
                return Outcome("fail", reason=f"tool '{node.tool}' is not registered")
            started = time.perf_counter()
            try:
                result = fn(**args)
                json.dumps(result)
            except Exception as exc:  # a tool's failure is the node's failure, not the runtime's
                return Outcome("fail", reason=f"tool '{node.tool}' raised {type(exc).__name__}: {exc}")
            walk.record_tool(node, node.tool, args, result, time.perf_counter() - started)
        try:
            writes = verify_answer(node, result, walk.state, walk.input)
        except OutputRejected as exc:
            return Outcome("fail", reason=f"tool '{node.tool}' returned a bad result: {exc.reason}")
        return Outcome("ok", writes=writes)
