"""`human`: pause the run (status `waiting`) until a person's answer arrives.

The answer must validate against grammars/<node>.json; it is then committed like a
model's answer. prompts/<node>.txt, when present, is the question shown to the person."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.errors import OutputRejected
from runtime.nodes.base import LoadContext, NodeDrawing, Outcome, RunContext
from runtime.verify import verify_answer

if TYPE_CHECKING:
    from runtime.pack.model import Node


class HumanKind:
    name = "human"
    keys: frozenset[str] = frozenset()
    drawing = NodeDrawing(shape="ellipse", css_class="node-human", label="human", mermaid=('[/"', '"/]'))
    terminal = False
    can_fail = False
    waits = True
    asks_model = False

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        node.prompt = loader.prompt(node, required=False)
        node.schema, node.validator = loader.schema(node.id, required=True)

    def run(self, node: Node, walk: RunContext) -> Outcome:
        prompt = node.prompt.render(walk.view()) if node.prompt is not None else ""
        answer = walk.answers.pop(node.id, None)
        if answer is None:
            return Outcome("wait", prompt=prompt)
        try:
            writes = verify_answer(node, answer, walk.state, walk.input)
        except OutputRejected as exc:
            return Outcome("fail", reason=f"human answer rejected: {exc.reason}", prompt=prompt)
        return Outcome("ok", writes=writes, prompt=prompt)
