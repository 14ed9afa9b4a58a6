"""What a node kind is: the keys it accepts, how it is loaded, how it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.pack.load import NodeLoader
    from runtime.pack.model import Node
    from runtime.walker import Walk

COMMON_KEYS = frozenset({"kind", "reads", "writes", "description"})


@dataclass
class Outcome:
    """What running a node produced. The walker commits, routes and checkpoints it."""

    status: str  # "ok" | "fail" | "unsure" | "wait" | "end"
    writes: dict[str, Any] = field(default_factory=dict)
    attempt: int = 0
    reason: str = ""
    prompt: str = ""  # the rendered prompt, for the trace


class NodeKind(Protocol):
    name: str
    keys: frozenset[str]  # accepted keys beyond COMMON_KEYS

    def load(self, node: Node, spec: dict[str, Any], loader: NodeLoader) -> None:
        """Fill kind-specific fields of `node` from `spec`, reporting issues to `loader`."""

    def run(self, node: Node, walk: Walk) -> Outcome:
        """Execute the node against the walk's current state. Must not mutate state."""
