"""The checkpoint journal's entries as data, and the one decoder of a journal into a Trace.

A run appends one entry per event to its CheckpointStore (runtime.checkpoint.Entry:
kind, node, step, payload). The payloads are JSON objects on disk; here each kind the
walk writes has a dataclass that writes (`to_payload`) and reads (`from_payload`) that
object, key for key, so checkpoints written before these classes existed still resume:

- "tool": a tool's result, journaled the moment it returns (ToolPayload);
- "step": a committed step, the attempts made since the last entry and the retry budget
  left (StepPayload);
- "escalate": a climb to the next model tier, journaled before that tier is asked
  (EscalatePayload);
- "wait": a run that stops to wait for a person (WaitPayload).

runtime.trace.TraceBuilder rebuilds the run's Trace from these entries one at a time, as
the walk that wrote them built its own; `Trace.from_journal` does it for a whole journal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from runtime.trace_items import Attempt, Candidate, EdgeTaken, Step, ToolCall

_STEP_FIELDS = frozenset(f.name for f in fields(Step)) - {"edge", "replayed"}
_ATTEMPT_FIELDS = frozenset(f.name for f in fields(Attempt))


@dataclass(kw_only=True)
class ToolPayload:
    """A "tool" entry: what a tool was called with and returned. `key`: the idempotency
    key it was called with (side-effecting tools; absent in checkpoints older than keys)."""

    tool: str
    args: dict[str, Any]
    result: Any
    latency_s: float = 0.0
    key: str | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "args": self.args,
            "result": self.result,
            "latency_s": self.latency_s,
            "key": self.key,
        }

    def call(self, node: str, step: int, *, replayed: bool) -> ToolCall:
        """The trace's record of this call, made at `node` in `step`."""
        return ToolCall(
            node=node,
            step=step,
            tool=self.tool,
            args=self.args,
            result=self.result,
            latency_s=self.latency_s,
            replayed=replayed,
            key=self.key,
        )

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ToolPayload:
        return cls(
            tool=payload["tool"],
            args=payload["args"],
            result=payload["result"],
            latency_s=payload.get("latency_s", 0.0),
            key=payload.get("key"),
        )


@dataclass(kw_only=True)
class StepPayload:
    """A "step" entry: the step as committed (its fields, `edge` as a dict or None; not
    `replayed`), the attempts made since the previous entry, and the retry budget left."""

    step: Step
    attempts: list[Attempt] = field(default_factory=list)
    budget_left: int | None = None

    def to_payload(self) -> dict[str, Any]:
        # Shallow copies: asdict() deep-copies every value and was half the walker's time.
        payload = {**vars(self.step), "edge": vars(self.step.edge) if self.step.edge else None}
        payload.pop("replayed")
        payload["attempts"] = [vars(a) for a in self.attempts]
        payload["budget_left"] = self.budget_left
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, replayed: bool = False) -> StepPayload:
        edge = payload.get("edge")
        known = {k: v for k, v in payload.items() if k in _STEP_FIELDS}
        return cls(
            step=Step(**known, edge=EdgeTaken(**edge) if edge else None, replayed=replayed),
            attempts=journaled_attempts(payload),
            budget_left=payload.get("budget_left"),
        )


@dataclass(kw_only=True)
class EscalatePayload:
    """An "escalate" entry: node `node` at step `step` climbs from tier `from_tier` to
    `to_tier` (the next tier's name) for `reason`; `tier_index` is the tier it continues
    on, `escalations` and `candidates` what the node's steps gathered so far (as in
    Step). `node` and `step` are also the entry's own; a resumed run continues the climb
    only at that node and step."""

    node: str
    step: int
    from_tier: str
    to_tier: str
    reason: str
    tier_index: int
    escalations: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    budget_left: int | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "from": self.from_tier,
            "to": self.to_tier,
            "reason": self.reason,
            "node": self.node,
            "tier_index": self.tier_index,
            "escalations": self.escalations,
            "candidates": self.candidates,
            "attempts": [vars(a) for a in self.attempts],
            "budget_left": self.budget_left,
        }

    @classmethod
    def from_payload(cls, node: str, step: int, payload: Mapping[str, Any]) -> EscalatePayload:
        return cls(
            node=node,
            step=step,
            from_tier=payload.get("from", ""),
            to_tier=payload.get("to", ""),
            reason=payload.get("reason", ""),
            tier_index=int(payload["tier_index"]),
            escalations=list(payload.get("escalations", [])),
            candidates=list(payload.get("candidates", [])),
            attempts=journaled_attempts(payload),
            budget_left=payload.get("budget_left"),
        )


@dataclass(kw_only=True)
class WaitPayload:
    """A "wait" entry: the run waits at `node` (the entry's node, not written in the
    payload) for a person, who is asked `question`. `reason`: "human" (a human node) or
    "escalated" (a model node past the last tier). A node escalated past the last tier
    also keeps the tier it reached, its escalations and its candidates (as in Step); a
    human node's wait has none of the three (None here, absent from the payload)."""

    node: str
    question: str = ""
    reason: str = "human"
    tier: str | None = None
    escalations: list[dict[str, Any]] | None = None
    candidates: list[Candidate] | None = None
    attempts: list[Attempt] = field(default_factory=list)
    budget_left: int | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"question": self.question, "reason": self.reason}
        if self.escalated:
            payload |= {"tier": self.tier, "escalations": self.escalations, "candidates": self.candidates}
        return payload | {"attempts": [vars(a) for a in self.attempts], "budget_left": self.budget_left}

    @property
    def escalated(self) -> bool:
        """Whether the payload has the climb's tier, escalations and candidates."""
        return self.escalations is not None or self.candidates is not None or self.tier is not None

    @classmethod
    def from_payload(cls, node: str, payload: Mapping[str, Any]) -> WaitPayload:
        return cls(
            node=node,
            question=payload.get("question", ""),
            reason=payload.get("reason", "human"),
            tier=payload.get("tier"),
            escalations=payload.get("escalations"),
            candidates=payload.get("candidates"),
            attempts=journaled_attempts(payload),
            budget_left=payload.get("budget_left"),
        )


def journaled_attempts(payload: Mapping[str, Any]) -> list[Attempt]:
    """The attempts a "step", "escalate" or "wait" payload holds (none when it holds none)."""
    return [Attempt(**{k: v for k, v in a.items() if k in _ATTEMPT_FIELDS}) for a in payload.get("attempts", [])]
