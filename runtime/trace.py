"""What a run did, as data: the steps walked, every model attempt, every tool call
(their classes are runtime.trace_items'); the run's status (RunStatus); the trace
rebuilt from a run's checkpoint journal (Trace.from_journal, TraceBuilder).

Rejected answers are kept here (`Attempt.text`) for the pack's author to inspect.
They are never sent to a model again and never logged above DEBUG."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from runtime.checkpoint import Entry
from runtime.journal import StepPayload, ToolPayload, journaled_attempts
from runtime.trace_items import Attempt as Attempt
from runtime.trace_items import EdgeTaken as EdgeTaken
from runtime.trace_items import Step as Step
from runtime.trace_items import ToolCall as ToolCall

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


class RunStatus(StrEnum):
    """Where a run stands (Trace.status, RunResult.status, the checkpoint's status).
    Members are strings and compare equal to their values, which are what is stored."""

    RUNNING = "running"
    WAITING = "waiting"  # for a person (a human node, or a model node past the last tier)
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class Trace:
    run_id: str
    pack: str
    case_id: str | None = None
    steps: list[Step] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: str = RunStatus.RUNNING  # a RunStatus (str: a stored trace may hold another word)
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
        if self.status == RunStatus.WAITING or any(s.tier == "person" or s.provenance for s in self.steps):
            return "person"
        rank = {name: i for i, name in enumerate(self.ladder)}
        used = [rank[s.tier] for s in self.steps if s.tier in rank]
        return self.ladder[max(used)] if used else self.ladder[0]

    @property
    def tier(self) -> str:
        if self.status in (RunStatus.FAILED, RunStatus.CANCELLED) or any(
            s.edge and s.edge.kind == "on_fail" for s in self.steps
        ):
            return "failed"
        waits = _waiting_kinds()
        if self.status == RunStatus.WAITING or any(
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
        """Answers the run judged: not reasoning calls, nor calls made ahead and dropped
        (runtime.lookahead), which model_calls and the token totals do count."""
        return sum(1 for a in self.attempts if a.stage not in ("reasoning", "lookahead"))

    def totals(self) -> dict[str, float]:
        return {
            "generations": self.generations,
            "model_calls": len(self.attempts),
            "prompt_tokens": sum(a.prompt_tokens for a in self.attempts),
            "cached_tokens": sum(a.cached_tokens for a in self.attempts),
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

    @classmethod
    def from_journal(
        cls,
        entries: Iterable[Entry | EntryRow],
        *,
        run_id: str,
        pack: str,
        case_id: str | None = None,
        replayed: bool = False,
    ) -> Trace:
        """The trace a run's checkpoint journal holds: its steps, attempts and tool calls,
        as the walk that wrote `entries` (Entry, or (kind, node, step, payload) rows, in
        journal order) built them. Its status stays "running": the journal does not hold
        the run's end. `replayed` marks the steps and tool calls as replayed. One entry at
        a time: TraceBuilder."""
        builder = TraceBuilder(run_id, pack, case_id=case_id, replayed=replayed)
        return builder.extend(entries)


# A journal entry as the studio reads it from its own tables: (kind, node, step, payload).
EntryRow = tuple[str, str, int, Mapping[str, Any]]


class TraceBuilder:
    """Rebuilds a run's Trace from its journal, one entry at a time (`add`), as the walk
    that wrote the entries built its own: a "step" entry adds its step and its attempts,
    an "escalate" or "wait" entry its attempts, a "tool" entry its tool call (with its
    idempotency key). A "wait" entry adds no step: a waiting run's step is the answer's.
    `replayed`: mark the steps and tool calls as replayed (a resumed run's view of what
    happened before it); the studio's live view of a run leaves it False.

    `trace` is the Trace being built, a new one unless given (`TraceBuilder.onto`)."""

    def __init__(self, run_id: str = "", pack: str = "", *, case_id: str | None = None, replayed: bool = False) -> None:
        self.trace = Trace(run_id=run_id, pack=pack, case_id=case_id)
        self.replayed = replayed

    @classmethod
    def onto(cls, trace: Trace, *, replayed: bool = False) -> TraceBuilder:
        """A builder that adds to `trace` (say, a resumed run's, its ladder already set)."""
        builder = cls(replayed=replayed)
        builder.trace = trace
        return builder

    def add(self, kind: str, node: str, step: int, payload: Mapping[str, Any]) -> Step | None:
        """Add one journal entry to the trace; the Step it added ("step" entries), else None."""
        trace = self.trace
        if kind == "step":
            entry = StepPayload.from_payload(payload, replayed=self.replayed)
            trace.steps.append(entry.step)
            trace.attempts.extend(entry.attempts)
            return entry.step
        if kind in ("escalate", "wait"):
            trace.attempts.extend(journaled_attempts(payload))
        elif kind == "tool":
            trace.tool_calls.append(ToolPayload.from_payload(payload).call(node, step, replayed=self.replayed))
        return None

    def add_entry(self, entry: Entry | EntryRow) -> Step | None:
        """`add` for an Entry, or a (kind, node, step, payload) row."""
        if isinstance(entry, Entry):
            return self.add(entry.kind, entry.node, entry.step, entry.payload)
        kind, node, step, payload = entry
        return self.add(kind, node, step, payload)

    def extend(self, entries: Iterable[Entry | EntryRow]) -> Trace:
        """Add every entry, in order; the trace."""
        for entry in entries:
            self.add_entry(entry)
        return self.trace


def _waiting_kinds() -> tuple[str, ...]:
    """The node kinds whose visit escalates a run (they wait for a person)."""
    from runtime.nodes import kind_names  # the registry sits above this data module

    return kind_names(waits=True)


def _known(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of the dataclass `kind` (later versions may add keys)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}
