"""Label priors as a search coordinate (docs/compiler.md, "The search"): a generate node
that writes a closed-choice field may divide out the target's bias toward some labels
(runtime.prior, "calibrate before use"). The prior is measured on the target, on
content-free fillers, with the node's own prompt under its setting (its examples and
instruction text change the bias), once per (arm, plan, node, node setting); the calls go
through the target cache and count against the budget like any other. A node whose
target answers without logprobs (or refuses the fillers, as a scripted model does) has
no prior to measure, so the coordinate is not offered for it. The search keeps the prior only where validation shows it helps."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from runtime import Backend, BackendError, Pack, measure_prior

if TYPE_CHECKING:
    from compiler.plan import Plan

# arm, plan key, node, the node's setting with its prior flag off (compiler.trials.NodeSetting)
PriorKey = tuple[str, str, str, Hashable]


class PriorBook:
    """Measured priors, per (arm, plan, node, node setting). `load` gives the trial pack
    of a setting (TrialRunner.load); `state` the state values a node's prompt reads."""

    def __init__(self, backend: Backend, state: Callable[[Plan, str], Mapping[str, Any]], scripted: bool) -> None:
        self.backend = backend
        self.scripted = scripted  # the target is a scripted model (fake:, sim:), which refuses the fillers
        self.state = state
        self._values: dict[PriorKey, dict[str, float] | None] = {}

    def values(
        self, key: tuple[str, str], plan: Plan, node: str, base: Hashable, pack: Callable[[], Pack]
    ) -> dict[str, float] | None:
        """The node's prior under `base` (its setting, prior flag off): measured the first time
        on `pack()` (a trial pack holding the node under that setting), None without logprobs."""
        at: PriorKey = (key[0], key[1], node, base)
        if at not in self._values:
            try:
                self._values[at] = measure_prior(pack(), node, self.backend, state=self.state(plan, node))
            except BackendError:
                if not self.scripted:  # a server error is not cached: skipping it would change a rebuild's path
                    raise
                self._values[at] = None  # a scripted target has no answer for a filler: no prior to divide out
        return self._values[at]

    def measured(self, key: tuple[str, str], node: str, base: Hashable) -> bool:
        """Whether the node's prior under `base` was measured (found or not)."""
        return (key[0], key[1], node, base) in self._values


def prior_key(field: str, values: Mapping[str, float]) -> dict[str, Any]:
    """The graph.yaml key a measured prior becomes."""
    return {"prior": {"field": field, "values": {k: round(v, 6) for k, v in values.items()}}}


__all__ = ["PriorBook", "prior_key"]
