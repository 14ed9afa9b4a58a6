"""What a run did, as data: the steps walked, every model attempt, every tool call.

Rejected answers are kept here (`Attempt.text`) for the pack's author to inspect.
They are never sent to a model again and never logged above DEBUG."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

TIERS = ("auto", "escalated", "failed")

# The version of `Trace.to_dict`'s shape, written into it as "version". Raise it when a
# key is renamed or removed (adding a key is compatible); readers of stored traces
# (`Trace.from_dict`, SQL over a stored trace) name the version they understand.
# Version 1: run_id, pack, case_id, steps, attempts, tool_calls, status, end_node, error,
# path, tier, totals. A stored dict without "version" is version 1.
TRACE_VERSION = 1


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
    confidence: dict[str, Any] | None = None  # runtime.confidence.Confidence as a dict (field, value, p, margin, source)


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
        waits = _waiting_kinds()
        if self.status == "waiting" or any(
            s.kind in waits or (s.edge and s.edge.kind == "on_unsure") for s in self.steps
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
        data: dict[str, Any] = {"version": TRACE_VERSION, **asdict(self)}
        data["path"] = self.path
        data["tier"] = self.tier
        data["totals"] = self.totals()
        if not include_rejected_text:
            for a in data["attempts"]:
                if not a["ok"]:
                    a["text"] = ""
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        """A trace from its dict form (`to_dict`, any version up to TRACE_VERSION).
        Derived keys (path, tier, totals) are recomputed, not read."""
        version = int(data.get("version", 1))
        if version > TRACE_VERSION:
            raise ValueError(f"trace version {version} is newer than this runtime's ({TRACE_VERSION})")
        steps = []
        for raw in data.get("steps", []):
            step = dict(raw)
            edge = step.pop("edge", None)
            steps.append(Step(**_known(Step, step), edge=EdgeTaken(**_known(EdgeTaken, edge)) if edge else None))
        return cls(
            run_id=str(data.get("run_id", "")),
            pack=str(data.get("pack", "")),
            case_id=data.get("case_id"),
            steps=steps,
            attempts=[Attempt(**_known(Attempt, a)) for a in data.get("attempts", [])],
            tool_calls=[ToolCall(**_known(ToolCall, t)) for t in data.get("tool_calls", [])],
            status=str(data.get("status", "running")),
            end_node=data.get("end_node"),
            error=data.get("error"),
        )


def _waiting_kinds() -> tuple[str, ...]:
    """The node kinds whose visit escalates a run (they wait for a person)."""
    from runtime.nodes import kind_names  # the registry sits above this data module

    return kind_names(waits=True)


def _known(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of the dataclass `kind` (later versions may add keys)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}
