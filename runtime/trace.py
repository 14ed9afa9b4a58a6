"""What a run did, as data: the steps walked, every model attempt, every tool call.

Rejected answers are kept here (`Attempt.text`) for the pack's author to inspect.
They are never sent to a model again and never logged above DEBUG."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

TIERS = ("auto", "escalated", "failed")
# The words people read for the tiers (reports, the CLI's eval line, the studio's pages
# and API; docs/decisions.md). The stored value "failed" stays (traces, database rows),
# but it is never shown: "failed" would read as "the answer was wrong", while this tier
# holds runs that ended without an answer (they failed to finish, or took on_fail).
TIER_WORDS = {"auto": "auto", "escalated": "escalated", "failed": "unanswered"}

# The version of `Trace.to_dict`'s shape, written into it as "version". Raise it when a
# key is renamed or removed (adding a key is compatible); readers of stored traces
# (`Trace.from_dict`, SQL over a stored trace) name the version they understand.
# Version 1: run_id, pack, case_id, steps, attempts, tool_calls, status, end_node, error,
# path, tier, totals. A stored dict without "version" is version 1. Added since (compatible):
# steps[].confidence, steps[].prior; model tiers (docs/tiers.md): steps[].tier, steps[].escalations,
# steps[].candidates, steps[].provenance, attempts[].tier, ladder, escalations, settled_by;
# tools (docs/tools.md): tool_calls[].key, steps[].tool_stats, tool_stats.
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
    candidates: list[dict[str, Any]] = field(default_factory=list)
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
    ladder: list[str] = field(default_factory=list)  # the model tiers' names, small to large ([] without tiers)

    @property
    def path(self) -> list[str]:
        return [s.node for s in self.steps]

    @property
    def escalations(self) -> list[dict[str, Any]]:
        """Every escalation of the run, in order (each step's `escalations`)."""
        return [e for s in self.steps for e in s.escalations]

    @property
    def settled_by(self) -> str | None:
        """The highest tier the run needed: "person" when a person answered or is
        waited for, else the largest model tier any node was answered on; None in runs
        without tiers."""
        if not self.ladder:
            return None
        if self.status == "waiting" or any(s.tier == "person" or s.provenance for s in self.steps):
            return "person"
        rank = {name: i for i, name in enumerate(self.ladder)}
        used = [rank[s.tier] for s in self.steps if s.tier in rank]
        return self.ladder[max(used)] if used else self.ladder[0]

    @property
    def tier(self) -> str:
        if self.status in ("failed", "cancelled") or any(s.edge and s.edge.kind == "on_fail" for s in self.steps):
            return "failed"
        waits = _waiting_kinds()
        if self.status == "waiting" or any(
            s.kind in waits or s.provenance or (s.edge and s.edge.kind == "on_unsure") for s in self.steps
        ):
            return "escalated"
        return "auto"

    @property
    def tool_stats(self) -> dict[str, Any]:
        """The run's tool counters: "model_calls" (the choose_tool nodes' calls to choose),
        "tool_calls" (every tool call of the run, replayed ones included), "invalid_choices",
        "repeats", and per tool {"calls", "invalid", "repeats"}. Summed from the steps'
        `tool_stats` and `tool_calls`, both journaled, so a resumed run counts the same."""
        totals: dict[str, Any] = {
            "model_calls": 0,
            "tool_calls": len(self.tool_calls),
            "invalid_choices": 0,
            "repeats": 0,
        }
        per_tool: dict[str, dict[str, int]] = {}

        def row(name: str) -> dict[str, int]:
            return per_tool.setdefault(name, {"calls": 0, "invalid": 0, "repeats": 0})

        for call in self.tool_calls:
            row(call.tool)["calls"] += 1
        for s in self.steps:
            if not s.tool_stats:
                continue
            for key in ("model_calls", "invalid_choices", "repeats"):
                totals[key] += int(s.tool_stats.get(key, 0))
            for name, counts in s.tool_stats.get("per_tool", {}).items():
                for key in ("invalid", "repeats"):
                    row(name)[key] += int(counts.get(key, 0))
        totals["per_tool"] = dict(sorted(per_tool.items()))
        return totals

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
        data["escalations"] = self.escalations
        data["settled_by"] = self.settled_by
        data["totals"] = self.totals()
        data["tool_stats"] = self.tool_stats
        if not include_rejected_text:
            for a in data["attempts"]:
                if not a["ok"]:
                    a["text"] = ""
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        """A trace from its dict form (`to_dict`, any version up to TRACE_VERSION).
        Derived keys (path, tier, totals, escalations, settled_by, tool_stats) are recomputed, not read."""
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
            ladder=list(data.get("ladder", [])),
        )


def _waiting_kinds() -> tuple[str, ...]:
    """The node kinds whose visit escalates a run (they wait for a person)."""
    from runtime.nodes import kind_names  # the registry sits above this data module

    return kind_names(waits=True)


def _known(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of the dataclass `kind` (later versions may add keys)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}
