"""A case's result: what one run of a gold case did (CaseResult, its field diffs and
problems), and its entry in the eval report (docs/eval-report.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.logs import redact_data
from runtime.trace import Trace

SCHEMA_CATEGORIES = ("parse", "schema", "truncated")
DIVERGED = "diverged"  # a case's status when its tool calls left the replayed recording

# What a case problem is about: the end node the case names ("end"), the run's status
# when the case names no end ("status"), the path the case names ("path").
PROBLEM_KINDS = ("end", "status", "path", "scorer")  # scorer: the host's scorer failed on the case
PATH_PROBLEM_KINDS = ("end", "path")  # the case's declared route was not followed


@dataclass(frozen=True)
class CaseProblem:
    """Why a case failed, beside its field diffs: a machine-readable `kind` (one of
    PROBLEM_KINDS) and a sentence for people. `str()` is the sentence."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def from_stored(cls, value: Any) -> CaseProblem:
        """A problem as stored by `to_dict`, or as a bare sentence (rows written before
        problems had kinds: the sentence is classified by this module's own wording)."""
        if isinstance(value, Mapping):
            return cls(str(value.get("kind", "status")), str(value.get("message", "")))
        text = str(value)
        for kind, prefix in _LEGACY_PREFIXES:
            if text.startswith(prefix):
                return cls(kind, text)
        return cls("status", text)


_LEGACY_PREFIXES = (("end", "expected to stop at"), ("path", "path did not visit"))


@dataclass
class FieldDiff:
    field: str
    expected: Any
    actual: Any
    missing: bool = False
    score: float | None = None  # a scorer's score (compare: scorer:NAME), below the field's `pass`
    reason: str = ""  # and its reason


@dataclass
class CaseResult:
    case_id: str
    passed: bool
    status: str
    tier: str
    output: dict[str, Any]
    diffs: list[FieldDiff]
    problems: list[CaseProblem]  # end / status / path problems
    blamed: str | None
    path: list[str]
    edges: list[int]
    totals: dict[str, float]
    rejections: dict[str, int]
    trace: Trace
    tags: tuple[str, ...] = ()
    # State committed before the run stopped, for runs that did not end `done` in the
    # auto tier (escalated, failed, waiting): their `output` is {} or partial.
    committed: dict[str, Any] = field(default_factory=dict)
    repeat: int = 1  # which of the eval's `repeats` runs of this case (1-based)
    score: float = 0.0  # partial credit: the share of expected fields that match by their rule
    expected: dict[str, Any] = field(default_factory=dict)  # the case's gold values, for the baseline
    settled_by: str | None = None  # with model tiers: the tier (or "person") the case needed at most
    # Replaying a tool recording (evaluate(tape=)): why this run's calls left it. A
    # diverged case has status "diverged": neither passed nor a model failure.
    diverged: list[str] = field(default_factory=list)
    # The tool calls the gold path makes (the case's `tools`, else the tool nodes on its
    # `path`), by name in order; None when the case says neither (not in tool precision).
    gold_tools: tuple[str, ...] | None = None

    @property
    def tool_counts(self) -> dict[str, int]:
        """Tool calls made live and answered without calling (a recording, the journal)."""
        replayed = sum(1 for t in self.trace.tool_calls if t.replayed)
        return {"live": len(self.trace.tool_calls) - replayed, "replayed": replayed}

    @property
    def schema_violations(self) -> int:
        return sum(n for cat, n in self.rejections.items() if cat in SCHEMA_CATEGORIES)


def case_trace(c: CaseResult, *, rejected_text: bool = False) -> dict[str, Any]:
    """A case's trace for a report: rejected attempts' text blanked unless
    `rejected_text` (it may be wrong in misleading ways, or quote the input), and every
    secret the process knows redacted (runtime.redact_data)."""
    data: dict[str, Any] = redact_data(c.trace.to_dict(include_rejected_text=rejected_text))
    return data


def case_dict(c: CaseResult, *, traces: bool = False, rejected_text: bool = False) -> dict[str, Any]:
    out = {
        "id": c.case_id,
        "repeat": c.repeat,
        "passed": c.passed,
        "score": c.score,
        "status": c.status,
        "tier": c.tier,
        "settled_by": c.settled_by,
        "blamed": c.blamed,
        "tool_calls": c.tool_counts,
        "diverged": c.diverged,
        "output": c.output,
        "committed": c.committed,
        "path": c.path,
        "problems": [str(p) for p in c.problems],
        "problem_kinds": [p.kind for p in c.problems],
        "tags": list(c.tags),
        "diffs": [
            {"field": d.field, "expected": d.expected, "actual": d.actual, "missing": d.missing} for d in c.diffs
        ],
        "totals": c.totals,
        "rejections": c.rejections,
        "tool_stats": c.trace.tool_stats,
        "gold_tools": list(c.gold_tools) if c.gold_tools is not None else None,
    }
    if traces:
        out["trace"] = case_trace(c, rejected_text=rejected_text)
    return out


def diff_dicts(diffs: list[FieldDiff]) -> list[dict[str, Any]]:
    return [{"field": d.field, "actual": d.actual, "missing": d.missing} for d in diffs]
