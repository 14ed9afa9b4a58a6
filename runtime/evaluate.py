"""The evalset runner: run every gold case, score it, blame a node for each failure.

Report shape (`EvalReport.to_dict`, written by `packforge eval --json`) is documented
in docs/eval-report.md."""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from runtime.backends.base import Backend
from runtime.blame import blame
from runtime.calibration import DEFAULT_TARGET, calibrate, gate_minimums
from runtime.checkpoint import CheckpointStore, MemoryStore
from runtime.logs import redact_data
from runtime.pack.fields import FieldRule, rule_for, same
from runtime.pack.model import Case, Edge, Pack
from runtime.recordings import ToolTape
from runtime.scoring import baseline_summary, case_score, field_table, observed, trivial_answers
from runtime.stats import percentile, wilson_interval
from runtime.tiers import PERSON, Tier
from runtime.tools import Tool
from runtime.trace import Trace
from runtime.walker import RunOptions, RunResult, run_pack

SCHEMA_CATEGORIES = ("parse", "schema", "truncated")
DIVERGED = "diverged"  # a case's status when its tool calls left the replayed recording

# What a case problem is about: the end node the case names ("end"), the run's status
# when the case names no end ("status"), the path the case names ("path").
PROBLEM_KINDS = ("end", "status", "path")
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


@dataclass
class EvalReport:
    pack: str
    version: str
    model: str
    edges: list[Edge]
    cases: list[CaseResult] = field(default_factory=list)
    repeats: int = 1  # runs per case; `cases` holds one CaseResult per run
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)  # case id -> expected values
    gates: dict[str, float] = field(default_factory=dict)  # gated node -> its confidence `min`
    rules: dict[str, FieldRule] = field(default_factory=dict)  # the pack's `fields:`
    train_tag: str | None = None  # the pack's `train_tag`: its cases are the train split
    ladder: list[str] = field(default_factory=list)  # the model tiers' names, small to large ([] without tiers)
    tape: str | None = None  # "record" | "replay" when evaluated with a tool recording

    def tool_recording(self) -> dict[str, Any]:
        """Tool calls made live and replayed over every run, and the diverged runs
        (docs/tools.md, "Recorded tool results")."""
        counts = [c.tool_counts for c in self.cases]
        return {
            "mode": self.tape,
            "live": sum(c["live"] for c in counts),
            "replayed": sum(c["replayed"] for c in counts),
            "diverged": sum(1 for c in self.cases if c.diverged),
            "diverged_cases": [
                {"id": c.case_id, "repeat": c.repeat, "reasons": c.diverged} for c in self.cases if c.diverged
            ],
        }

    def rows(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(expected, actual) per case, as runtime.scoring reads them."""
        return [(c.expected, observed(c.expected, _diff_dicts(c.diffs))) for c in self.cases]

    def mean_score(self) -> float:
        return statistics.fmean(c.score for c in self.cases) if self.cases else 0.0

    def field_table(self) -> dict[str, dict[str, Any]]:
        """Per expected field: accuracy beside the trivial baseline's, F1 for set fields."""
        return field_table(self.rules, self.rows())

    def trivial_baseline(self, tier: str | None = None) -> dict[str, Any]:
        """Always the most frequent expected value per field (over every case): its
        answers, and its pass rate and mean score over every case (or over `tier`'s)."""
        answers = trivial_answers(self.rules, [c.expected for c in self.cases])
        chosen = [c.expected for c in self.cases if tier is None or c.tier == tier]
        return baseline_summary(self.rules, chosen, answers)

    @property
    def total(self) -> int:
        """Runs scored: every run but the diverged ones (a replayed tool recording could
        not answer them), which are neither passes nor failures."""
        return sum(1 for c in self.cases if not c.diverged)

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    def held_out(self) -> tuple[int, int] | None:
        """(passed, total) over the runs of cases without the train tag; None when the
        pack declares no train split."""
        if self.train_tag is None:
            return None
        rest = [c for c in self.cases if self.train_tag not in c.tags]
        return sum(c.passed for c in rest), len(rest)

    def failures_by_node(self) -> dict[str, int]:
        failed = [c for c in self.cases if not c.passed and not c.diverged]
        return dict(Counter(c.blamed or "(none)" for c in failed).most_common())

    def coverage(self) -> dict[str, Any]:
        taken = Counter(i for c in self.cases for i in set(c.edges))
        return {
            "taken": sum(1 for e in self.edges if taken[e.index]),
            "total": len(self.edges),
            "untaken": [_edge_name(e) for e in self.edges if not taken[e.index]],
            "per_edge": {_edge_name(e): taken[e.index] for e in self.edges},
        }

    def tiers(self) -> dict[str, Any]:
        counts = Counter(c.tier for c in self.cases)
        auto = [c for c in self.cases if c.tier == "auto"]
        return {
            "auto": counts["auto"],
            "escalated": counts["escalated"],
            "failed": counts["failed"],
            "auto_accuracy": (sum(c.passed for c in auto) / len(auto)) if auto else None,
        }

    def tiers_by_model(self) -> dict[str, dict[str, Any]]:
        """Per model tier (one row named by the model without tiers; "person" last with
        them): the cases it settled (the highest tier each case needed) and how many of
        those passed, the escalations out of it by kind (fail, unsure), and the model
        calls, tokens and cost spent on it over every case."""
        names = self.ladder or [self.model]
        rows: dict[str, dict[str, Any]] = {
            name: {
                "cases": 0,
                "passed": 0,
                "escalations": {"fail": 0, "unsure": 0},
                "model_calls": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "reasoning_tokens": 0,
                "cost_usd": 0.0,
            }
            for name in names
        }
        if self.ladder:
            rows[PERSON] = {"cases": 0, "passed": 0}
        for c in self.cases:
            row = rows.get(c.settled_by or names[0])
            if row is not None:
                row["cases"] += 1
                row["passed"] += int(c.passed)
            for a in c.trace.attempts:
                spent = rows.get(a.tier or names[0])
                if spent is None or "model_calls" not in spent:
                    continue
                spent["model_calls"] += 1
                spent["prompt_tokens"] += a.prompt_tokens
                spent["completion_tokens"] += a.completion_tokens
                spent["reasoning_tokens"] += a.reasoning_tokens
                spent["cost_usd"] += a.cost_usd
            for e in c.trace.escalations:
                out = rows.get(e["from"])
                kind = str(e["reason"]).split(":", 1)[0]
                if out is not None and kind in out["escalations"]:
                    out["escalations"][kind] += 1
        return rows

    def metrics(self) -> dict[str, float]:
        """The numbers a baseline gate compares."""
        n = max(self.total, 1)
        generations = sum(c.totals["generations"] for c in self.cases)
        violations = sum(c.schema_violations for c in self.cases)
        return {
            "pass_rate": self.passed / n,
            "escalation_rate": sum(c.tier == "escalated" for c in self.cases) / n,
            "schema_violation_rate": violations / generations if generations else 0.0,
            "mean_model_calls": sum(c.totals["model_calls"] for c in self.cases) / n,
            "cost_per_case": sum(c.totals["cost_usd"] for c in self.cases) / n,
        }

    def per_case(self) -> dict[str, dict[str, float]]:
        out = {}
        for key in ("generations", "prompt_tokens", "completion_tokens", "reasoning_tokens", "latency_s", "cost_usd"):
            values = [float(c.totals[key]) for c in self.cases] or [0.0]
            out[key] = {"mean": statistics.fmean(values), "p50": percentile(values, 50), "p95": percentile(values, 95)}
        return out

    def per_node(self) -> dict[str, dict[str, float]]:
        nodes: dict[str, dict[str, float]] = {}
        for case in self.cases:
            for a in case.trace.attempts:
                row = nodes.setdefault(
                    a.node, {"attempts": 0, "rejections": 0, "tokens": 0, "latency_s": 0.0, "cost_usd": 0.0}
                )
                row["attempts"] += 1
                row["rejections"] += 0 if a.ok else 1
                row["tokens"] += a.prompt_tokens + a.completion_tokens + a.reasoning_tokens
                row["latency_s"] += a.latency_s
                row["cost_usd"] += a.cost_usd
        return nodes

    def tool_metrics(self) -> dict[str, Any]:
        """Tool use over every run (`tool_metrics`)."""
        return tool_metrics((c.trace, c.gold_tools) for c in self.cases)

    def consistency(self) -> dict[str, Any]:
        """Per case, how many of its `repeats` runs passed; and how many cases passed
        every run (`always`), none (`never`) or some (`sometimes`)."""
        runs: dict[str, list[bool]] = {}
        for c in self.cases:
            runs.setdefault(c.case_id, []).append(c.passed)
        counts = Counter("always" if all(ok) else "never" if not any(ok) else "sometimes" for ok in runs.values())
        return {
            "repeats": self.repeats,
            "always": counts["always"],
            "sometimes": counts["sometimes"],
            "never": counts["never"],
            "cases": {case_id: {"runs": len(ok), "passed": sum(ok)} for case_id, ok in runs.items()},
        }

    def calibration(self, target: float = DEFAULT_TARGET) -> dict[str, Any]:
        """Per gated node: reliability table, threshold curve, proposal (runtime/calibration.py)."""
        runs = [(c.trace, self.expected.get(c.case_id, {})) for c in self.cases]
        return {node: cal.to_dict(target) for node, cal in calibrate(runs, self.gates, self.rules).items()}

    def _held_out_dict(self) -> dict[str, Any]:
        held = self.held_out()
        if held is None:
            return {}
        return {"train_tag": self.train_tag, "held_out": {"passed": held[0], "total": held[1]}}

    def to_dict(
        self, *, traces: bool = False, rejected_text: bool = False, target_auto_accuracy: float = DEFAULT_TARGET
    ) -> dict[str, Any]:
        """The report as one JSON-able document (docs/eval-report.md). `traces` adds each
        case's trace; the text of rejected attempts only with `rejected_text` too."""
        return {
            "pack": self.pack,
            "version": self.version,
            "model": self.model,
            "passed": self.passed,
            "total": self.total,
            "pass_rate_ci95": list(wilson_interval(self.passed, self.total)),
            **self._held_out_dict(),
            "mean_score": self.mean_score(),
            "fields": self.field_table(),
            "baseline": self.trivial_baseline(),
            "metrics": self.metrics(),
            "tiers": self.tiers(),
            "tiers_by_model": self.tiers_by_model(),
            "coverage": self.coverage(),
            "failures_by_node": self.failures_by_node(),
            "per_case": self.per_case(),
            "per_node": self.per_node(),
            "repeats": self.repeats,
            "consistency": self.consistency(),
            "calibration": self.calibration(target_auto_accuracy),
            "tool_recording": self.tool_recording(),
            "tools": self.tool_metrics(),
            "cases": [_case_dict(c, traces=traces, rejected_text=rejected_text) for c in self.cases],
        }


def tool_metrics(runs: Iterable[tuple[Trace, Sequence[str] | None]]) -> dict[str, Any]:
    """Tool use over runs, each (its trace, its gold calls or None) (docs/eval-report.md):
    calls made, the choose_tool nodes' model calls, invalid choices and repeats, and tool
    precision: of the calls made in runs whose gold calls are known, the share the gold
    path expected (a call counts as expected up to the number of times the gold path
    makes it). Per tool the same, with its own precision (None: no scored call)."""
    per_tool: dict[str, dict[str, Any]] = {}
    totals = {"model_calls": 0, "tool_calls": 0, "invalid_choices": 0, "repeats": 0}
    scored = matched = expected_total = cases_scored = 0

    def row(name: str) -> dict[str, Any]:
        return per_tool.setdefault(
            name, {"calls": 0, "scored_calls": 0, "expected": 0, "matched": 0, "invalid": 0, "repeats": 0}
        )

    for trace, gold in runs:
        stats = trace.tool_stats
        for key in totals:
            totals[key] += stats[key]
        for name, counts in stats["per_tool"].items():
            r = row(name)
            for key in ("calls", "invalid", "repeats"):
                r[key] += counts[key]
        if gold is None:
            continue
        cases_scored += 1
        made = Counter(call.tool for call in trace.tool_calls)
        want = Counter(gold)
        for name in made.keys() | want.keys():
            r = row(name)
            r["scored_calls"] += made[name]
            r["expected"] += want[name]
            r["matched"] += min(made[name], want[name])
        scored += sum(made.values())
        matched += sum(min(made[n], want[n]) for n in made)
        expected_total += sum(want.values())
    for r in per_tool.values():
        r["precision"] = r["matched"] / r["scored_calls"] if r["scored_calls"] else None
    return {
        **totals,
        "cases_scored": cases_scored,
        "scored_calls": scored,
        "expected_calls": expected_total,
        "matched_calls": matched,
        "precision": matched / scored if scored else None,
        "per_tool": dict(sorted(per_tool.items())),
    }


def case_trace(c: CaseResult, *, rejected_text: bool = False) -> dict[str, Any]:
    """A case's trace for a report: rejected attempts' text blanked unless
    `rejected_text` (it may be wrong in misleading ways, or quote the input), and every
    secret the process knows redacted (runtime.redact_data)."""
    data: dict[str, Any] = redact_data(c.trace.to_dict(include_rejected_text=rejected_text))
    return data


def _case_dict(c: CaseResult, *, traces: bool = False, rejected_text: bool = False) -> dict[str, Any]:
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


def _diff_dicts(diffs: list[FieldDiff]) -> list[dict[str, Any]]:
    return [{"field": d.field, "actual": d.actual, "missing": d.missing} for d in diffs]


def _edge_name(e: Edge) -> str:
    kind = f" ({e.kind})" if e.kind != "next" else (f" [{e.when.source}]" if e.when else "")
    return f"{e.source} -> {e.target}{kind}"


def select_cases(pack: Pack, tags: set[str] | None = None) -> list[Case]:
    """The evalset cases an eval runs: every case, or those with any of `tags`."""
    return [c for c in pack.cases if not tags or tags & set(c.tags)]


def evaluate(
    pack: Pack,
    backend: Backend,
    *,
    tools: Mapping[str, Tool] | None = None,
    concurrency: int = 4,
    tags: set[str] | None = None,
    store: CheckpointStore | None = None,
    model: str | None = None,
    run_prefix: str = "eval",
    on_case: Callable[[CaseResult], None] | None = None,
    repeats: int = 1,
    tiers: Sequence[Tier] | None = None,
    tape: ToolTape | None = None,
) -> EvalReport:
    """Run every case (those with any of `tags`, when given) `repeats` times with bounded
    concurrency. Run ids are `<run_prefix>-<case>`, or `<run_prefix>-<case>-r<k>` (k from
    1) when `repeats` > 1. `on_case` is called once per finished run, one call at a time.
    `tiers`: model tiers for every run (docs/tiers.md; `backend` should be tier 0's);
    the report's `tiers_by_model` splits cases and spend by tier. `tape`: a tool
    recording (runtime.recordings) that every run records its tool calls into (mode
    "record") or takes their results from, calling no tool (mode "replay"); a run whose
    calls diverge from it is reported `diverged`, never passed or blamed."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    store = store if store is not None else MemoryStore()
    runs = [(case, k) for case in select_cases(pack, tags) for k in range(1, repeats + 1)]
    report = EvalReport(
        pack.name,
        pack.version,
        model or backend.spec,
        pack.edges,
        repeats=repeats,
        rules=pack.fields,
        train_tag=pack.train_tag,
        ladder=[t.name for t in tiers or []],
        tape=tape.mode if tape is not None else None,
    )
    report.expected = {c.id: dict(c.expected) for c in select_cases(pack, tags)}
    report.gates = gate_minimums(pack)
    lock = threading.Lock()

    def one(planned: tuple[Case, int]) -> CaseResult:
        case, k = planned
        hook = tape.for_run() if tape is not None else None
        result = run_pack(
            pack,
            case.input,
            backend=backend,
            tools=tools,
            store=store,
            run_id=f"{run_prefix}-{case.id}" + (f"-r{k}" if repeats > 1 else ""),
            case_id=case.id,
            answers=case.human,
            options=RunOptions(tape=hook),
            tiers=tiers,
        )
        scored = score_case(pack, case, result)
        scored.repeat = k
        if hook is not None and hook.diverged:
            mark_diverged(scored, hook.divergences)
        if on_case is not None:
            with lock:
                on_case(scored)
        return scored

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        report.cases = list(pool.map(one, runs))
    return report


def mark_diverged(scored: CaseResult, reasons: list[str]) -> None:
    """A run whose tool calls left the replayed recording: not a pass, not a failure
    of the pack or its model (its outcome would have needed a live tool call)."""
    scored.diverged = list(reasons)
    scored.passed = False
    scored.status = DIVERGED
    scored.blamed = None


def score_case(pack: Pack, case: Case, result: RunResult) -> CaseResult:
    trace = result.trace
    diffs = []
    for name, want in case.expected.items():
        if name not in result.state:
            diffs.append(FieldDiff(name, want, None, missing=True))
        elif not same(rule_for(pack.fields, name), want, result.state[name]):
            diffs.append(FieldDiff(name, want, result.state[name]))
    problems = []
    stopped_at = trace.end_node or result.waiting_at
    if case.end is not None and stopped_at != case.end:
        problems.append(
            CaseProblem("end", f"expected to stop at '{case.end}', stopped at '{stopped_at or result.status}'")
        )
    elif case.end is None and result.status != "done":
        problems.append(CaseProblem("status", f"run {result.status}" + (f": {trace.error}" if trace.error else "")))
    missed = _missed_path(case.path, trace.path)
    if missed is not None:
        problems.append(CaseProblem("path", f"path did not visit '{missed}' (took {' > '.join(trace.path)})"))
    passed = not diffs and not problems
    # What was committed before an escalated, failed or waiting run stopped; the diffs
    # above already compare against it (result.state is committed state only).
    committed = dict(result.state) if trace.tier != "auto" or result.status != "done" else {}
    rejections = Counter(a.category for a in trace.attempts if not a.ok and a.category)
    return CaseResult(
        case_id=case.id,
        passed=passed,
        status=result.status,
        tier=trace.tier,
        output=result.output,
        diffs=diffs,
        problems=problems,
        blamed=None if passed else blame(case, trace, [d.field for d in diffs], missed, pack=pack),
        path=trace.path,
        edges=[s.edge.index for s in trace.steps if s.edge is not None],
        totals=trace.totals(),
        rejections=dict(rejections),
        trace=trace,
        tags=case.tags,
        committed=committed,
        score=case_score({name: not any(d.field == name for d in diffs) for name in case.expected}, passed),
        expected=dict(case.expected),
        settled_by=trace.settled_by,
        gold_tools=gold_tools(pack, case),
    )


def gold_tools(pack: Pack, case: Case) -> tuple[str, ...] | None:
    """The tool calls `case`'s gold path makes: its `tools`, else the tools of the `tool`
    nodes on its `path`; None when it names neither."""
    if case.tools is not None:
        return case.tools
    if case.path is None:
        return None
    return tuple(t for t in (getattr(pack.nodes.get(n), "tool", None) for n in case.path) if t)


def _missed_path(expected: tuple[str, ...] | None, actual: list[str]) -> str | None:
    """The first node of `expected` that `actual` does not visit in order, if any."""
    if not expected:
        return None
    it = iter(actual)
    for node in expected:
        if not any(step == node for step in it):
            return node
    return None


# -- the baseline gate -------------------------------------------------------------------

DEFAULT_TOLERANCES: dict[str, float] = {
    "pass_rate": 0.0,  # absolute drop allowed
    "escalation_rate": 0.05,  # absolute rise allowed
    "schema_violation_rate": 0.05,  # absolute rise allowed
    "mean_model_calls": 0.10,  # relative rise allowed
    "cost_per_case": 0.10,  # relative rise allowed
}
# Which way each gate metric improves: "higher" (a drop beyond the tolerance fails the
# gate) or "lower" (a rise beyond it fails).
METRIC_DIRECTIONS: Mapping[str, str] = MappingProxyType(
    {
        "pass_rate": "higher",
        "escalation_rate": "lower",
        "schema_violation_rate": "lower",
        "mean_model_calls": "lower",
        "cost_per_case": "lower",
    }
)
_RELATIVE = {"mean_model_calls", "cost_per_case"}


def baseline_document(report: EvalReport) -> dict[str, Any]:
    return {
        "pack": report.pack,
        "version": report.version,
        "model": report.model,
        "metrics": report.metrics(),
        "tolerances": dict(DEFAULT_TOLERANCES),
    }


def check_baseline(metrics: Mapping[str, float], baseline: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Compare `metrics` (EvalReport.metrics()) to a baseline document (`baseline_document`:
    its "metrics" and optional "tolerances"); one row per metric: metric, baseline,
    current, limit, ok."""
    current = metrics
    base = baseline.get("metrics", {})
    tolerances = {**DEFAULT_TOLERANCES, **baseline.get("tolerances", {})}
    rows = []
    for name, tol in tolerances.items():
        if name not in base or name not in current:
            continue
        was, now = float(base[name]), float(current[name])
        if METRIC_DIRECTIONS.get(name) == "higher":
            limit = was - tol
            ok = now >= limit - 1e-12
        else:
            limit = was * (1 + tol) if name in _RELATIVE else was + tol
            ok = now <= limit + 1e-12
        rows.append({"metric": name, "baseline": was, "current": now, "limit": limit, "ok": ok})
    return rows
