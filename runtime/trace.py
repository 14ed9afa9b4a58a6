"""What a run did, as data: the steps walked, every model attempt, every tool call.

Rejected answers are kept here (`Attempt.text`) for the pack's author to inspect.
They are never sent to a model again and never logged above DEBUG."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

TIERS = ("auto", "escalated", "failed")


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
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    latency_s: float = 0.0
    ttft_s: float | None = None
    cost_usd: float = 0.0
    request_id: str = ""


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


@dataclass
class ToolCall:
    node: str
    step: int
    tool: str
    args: dict[str, Any]
    result: Any
    latency_s: float = 0.0
    replayed: bool = False


@dataclass
class Trace:
    run_id: str
    pack: str
    case_id: str | None = None
    steps: list[Step] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: str = "running"  # running | waiting | done | failed | cancelled
    end_node: str | None = None
    error: str | None = None

    @property
    def path(self) -> list[str]:
        return [s.node for s in self.steps]

    @property
    def tier(self) -> str:
        if self.status in ("failed", "cancelled") or any(s.edge and s.edge.kind == "on_fail" for s in self.steps):
            return "failed"
        if self.status == "waiting" or any(
            s.kind == "human" or (s.edge and s.edge.kind == "on_unsure") for s in self.steps
        ):
            return "escalated"
        return "auto"

    @property
    def generations(self) -> int:
        return sum(1 for a in self.attempts if a.stage != "reasoning")

    def totals(self) -> dict[str, float]:
        return {
            "generations": self.generations,
            "model_calls": len(self.attempts),
            "prompt_tokens": sum(a.prompt_tokens for a in self.attempts),
            "completion_tokens": sum(a.completion_tokens for a in self.attempts),
            "reasoning_tokens": sum(a.reasoning_tokens for a in self.attempts),
            "latency_s": sum(a.latency_s for a in self.attempts),
            "cost_usd": sum(a.cost_usd for a in self.attempts),
        }

    def commits(self) -> list[Step]:
        """Steps that wrote to state, in order: each write's provenance is (node, step, attempt)."""
        return [s for s in self.steps if s.writes and s.status == "ok"]

    def to_dict(self, include_rejected_text: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = self.path
        data["tier"] = self.tier
        data["totals"] = self.totals()
        if not include_rejected_text:
            for a in data["attempts"]:
                if not a["ok"]:
                    a["text"] = ""
        return data
