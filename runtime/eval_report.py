"""The eval report: every case's result and the numbers over them (EvalReport), tool use
over runs (tool_metrics). Its JSON shape (`EvalReport.to_dict`, written by
`packforge eval --json`) is documented in docs/eval-report.md."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.calibration import DEFAULT_TARGET, calibrate
from runtime.case_result import CaseResult, case_dict, diff_dicts
from runtime.pack.fields import FieldRule
from runtime.pack.model import Edge
from runtime.scoring import baseline_summary, field_table, observed_values, trivial_answers
from runtime.stats import percentile, wilson_interval
from runtime.tiers import PERSON
from runtime.trace import Trace


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
        return [(c.expected, observed_values(c.expected, diff_dicts(c.diffs))) for c in self.cases]

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
        keys = ("generations", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")
        for key in (*keys, "latency_s", "cost_usd"):
            values = [float(c.totals.get(key, 0)) for c in self.cases] or [0.0]
            out[key] = {"mean": statistics.fmean(values), "p50": percentile(values, 50), "p95": percentile(values, 95)}
        return out

    def per_node(self) -> dict[str, dict[str, float]]:
        nodes: dict[str, dict[str, float]] = {}
        for case in self.cases:
            for a in case.trace.attempts:
                row = nodes.setdefault(
                    a.node,
                    {
                        "attempts": 0,
                        "rejections": 0,
                        "tokens": 0,
                        "prompt_tokens": 0,
                        "cached_tokens": 0,
                        "latency_s": 0.0,
                        "cost_usd": 0.0,
                    },
                )
                row["attempts"] += 1
                row["rejections"] += 0 if a.ok or a.stage == "lookahead" else 1
                row["tokens"] += a.prompt_tokens + a.completion_tokens + a.reasoning_tokens
                row["prompt_tokens"] += a.prompt_tokens
                row["cached_tokens"] += a.cached_tokens
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
            "cases": [case_dict(c, traces=traces, rejected_text=rejected_text) for c in self.cases],
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


def _edge_name(e: Edge) -> str:
    kind = f" ({e.kind})" if e.kind != "next" else (f" [{e.when.source}]" if e.when else "")
    return f"{e.source} -> {e.target}{kind}"
