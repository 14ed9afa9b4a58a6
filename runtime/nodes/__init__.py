"""Node kinds, one module each, registered in this one table."""

from __future__ import annotations

from runtime.nodes.assert_ import AssertKind
from runtime.nodes.base import NodeKind
from runtime.nodes.end import EndKind
from runtime.nodes.generate import GenerateKind
from runtime.nodes.human import HumanKind
from runtime.nodes.tool import ToolKind

NODE_KINDS: dict[str, NodeKind] = {
    kind.name: kind for kind in (GenerateKind(), AssertKind(), ToolKind(), HumanKind(), EndKind())
}
