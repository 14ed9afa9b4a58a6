"""The items a run's Trace lists (runtime.trace): the steps walked (Step, with the edge
taken, EdgeTaken), every model attempt (Attempt), every tool call (ToolCall). The
checkpoint journal's payloads (runtime.journal) are built on them.

Rejected answers are kept here (`Attempt.text`) for the pack's author to inspect.
They are never sent to a model again and never logged above DEBUG."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict


class Candidate(TypedDict):
    """One answer a model gave at a node on a tier (Step.candidates): "answer" is the
    parsed JSON (None when it did not parse), "status" rejected | unsure | ok."""

    tier: str
    answer: Any
    status: str
    reason: str


class StepExtras(TypedDict, total=False):
    """The Step fields that running a node on the model tiers, or a person's answer, adds
    (runtime.tier_climb.run_node): the tier that answered, the climb's escalations and
    candidates, and who committed a person's writes."""

    tier: str | None
    escalations: list[dict[str, Any]]
    candidates: list[Candidate]
    provenance: str


@dataclass
class Attempt:
    node: str
    step: int
    attempt: int
    stage: str  # sample | resample | feedback | reasoning
    ok: bool
    category: str | None = None  # rejection category (runtime.verify.REJECTION_CATEGORIES)
    reason: str | None = None
    text: str = ""
    # With `sure_fields`: the first draw's settled values, which this answer was not asked
    # for; the answer verified is these with `text`'s fields (runtime.nodes.sure_fields).
    given: dict[str, Any] | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the server's prompt cache (0: none, or not said)
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    latency_s: float = 0.0
    ttft_s: float | None = None
    cost_usd: float = 0.0
    request_id: str = ""
    tier: str | None = None  # the model tier that was asked (runs with tiers only)


@dataclass
class EdgeTaken:
    index: int
    kind: str  # next | on_fail | on_unsure
    target: str


@dataclass
class Step:
    node: str
    step: int
    kind: str
    status: str  # ok | fail | unsure | wait | end
    writes: dict[str, Any] = field(default_factory=dict)
    attempt: int = 0  # which attempt's answer was committed (provenance)
    reason: str = ""
    edge: EdgeTaken | None = None
    prompt: str = ""
    replayed: bool = False
    # A confidence gate's measure (runtime.confidence.Confidence as a dict: field, value,
    # p, margin, source), kept on unsure steps too; None on nodes without a gate.
    confidence: dict[str, Any] | None = None
    # A label prior's correction (runtime.prior.apply_prior: field, from, to, scores,
    # reason); None on nodes without a `prior`.
    prior: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # e.g. "input.ticket cut from 9120 to 4000 chars (keep head)"
    # Model tiers (docs/tiers.md). `tier`: the tier that answered this node (its name, or
    # "person"); None in runs without tiers and for nodes that ask no model.
    tier: str | None = None
    # Each move up the ladder at this node: {"from", "to" (a tier or "person"), "reason", "node"}.
    escalations: list[dict[str, Any]] = field(default_factory=list)
    # Every answer the models gave at this node, on every tier: {"tier", "answer" (the
    # parsed JSON, None when it did not parse), "status" (rejected | unsure | ok), "reason"}.
    candidates: list[Candidate] = field(default_factory=list)
    # Who committed the writes when a person did ("human:<user>", or "human" when the
    # answer came without a name, as a gold case's `human` answers do); None for models.
    provenance: str | None = None
    # A choose_tool visit's counters: {"model_calls", "invalid_choices", "repeats", "stop"
    # (done | budget | repeat | failed), "per_tool": {tool: {"invalid", "repeats"}}};
    # None for other kinds. Journaled with the step, so a resumed run keeps them.
    tool_stats: dict[str, Any] | None = None


@dataclass
class ToolCall:
    node: str
    step: int
    tool: str
    args: dict[str, Any]
    result: Any
    latency_s: float = 0.0
    replayed: bool = False  # from the run's journal (a resumed run) or a recording, not called
    key: str | None = None  # the idempotency key it was called with (side-effecting tools)
