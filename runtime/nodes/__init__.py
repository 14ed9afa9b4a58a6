"""Node kinds, one module each, registered in this one table.

Adding a kind: write runtime/nodes/<kind>.py with a class that meets
`runtime.nodes.base.NodeKind` (its keys, `load`, `run`, its graph flags and its
`drawing`), add an instance to NODE_KINDS, and document it in docs/pack-format.md.
Nothing else in the runtime names a kind."""

from __future__ import annotations

from runtime.nodes.assert_ import AssertKind
from runtime.nodes.base import OTHER_DRAWING, NodeDrawing, NodeKind
from runtime.nodes.choose_tool import ChooseToolKind
from runtime.nodes.end import EndKind
from runtime.nodes.generate import GenerateKind
from runtime.nodes.human import HumanKind
from runtime.nodes.tool import ToolKind

NODE_KINDS: dict[str, NodeKind] = {
    kind.name: kind for kind in (GenerateKind(), AssertKind(), ToolKind(), ChooseToolKind(), HumanKind(), EndKind())
}


def drawing_for(kind: str) -> NodeDrawing:
    """How to draw a node of `kind` (OTHER_DRAWING for a kind that is not registered)."""
    found = NODE_KINDS.get(kind)
    return found.drawing if found is not None else OTHER_DRAWING


def kind_names(**flags: bool) -> tuple[str, ...]:
    """The registered kinds whose flags (terminal, can_fail, waits, asks_model) have the
    given values, in registry order: `kind_names(waits=True)` == ("human",)."""
    return tuple(name for name, kind in NODE_KINDS.items() if all(getattr(kind, f) == v for f, v in flags.items()))
