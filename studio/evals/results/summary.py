"""The summary and tiers pages' numbers, and the metrics a baseline gate compares
(runtime EvalReport.metrics())."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, F, IntegerField, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runtime import (
    PERSON,
    SCHEMA_CATEGORIES,
    TIER_WORDS,
    CaseResult,
    EvalReport,
    Pack,
    Trace,
    gold_tools,
    tool_metrics,
    wilson_interval,
)
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import TIERS, Status, ended, once_per_rows, ratio, scored, spread

__all__ = [
    "case_pass_rates",
    "compute_tiers_by_model",
    "metrics_of",
    "summarize",
    "tiers",
    "tiers_by_model",
    "tool_use",
]

TIERS_BY_MODEL_VERSION = 1  # the rows' shape; a new one is computed again, not read from the cache


# -- summary and the gate metrics ---------------------------------------------------------


def _totals(ev: Eval) -> dict[str, Any]:
    """One aggregate query over the scored rows."""
    rejected = {f"rej_{c}": Sum(Cast(KT(f"rejections__{c}"), IntegerField())) for c in SCHEMA_CATEGORIES}
    row = scored(ev).aggregate(
        n=Count("id"),
        passed=Count("id", filter=Q(status=Status.PASSED)),
        escalated=Count("id", filter=Q(tier="escalated")),
        generations=Sum("generations"),
        model_calls=Sum("model_calls"),
        cost=Sum("cost_usd"),
        latency=Sum("latency_s"),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        **rejected,
    )
    out = {k: (v or 0) for k, v in row.items()}
    out["violations"] = sum(out.pop(f"rej_{c}") for c in SCHEMA_CATEGORIES)
    return out


def _metrics(t: dict[str, Any]) -> dict[str, float]:
    n = max(t["n"], 1)
    return {
        "pass_rate": t["passed"] / n,
        "escalation_rate": t["escalated"] / n,
        "schema_violation_rate": t["violations"] / t["generations"] if t["generations"] else 0.0,
        "mean_model_calls": t["model_calls"] / n,
        "cost_per_case": t["cost"] / n,
    }


def metrics_of(ev: Eval) -> dict[str, float]:
    """The numbers a baseline gate compares, as runtime EvalReport.metrics() defines them."""
    return _metrics(_totals(ev))


def summarize(ev: Eval) -> dict[str, Any]:
    """Pass rate with its interval, tier split, schema-violation rate, and per-case
    generations, tokens, cost and latency (mean, p50, p95)."""
    t = _totals(ev)
    counts = dict(EvalCase.objects.filter(eval=ev).values_list("status").annotate(n=Count("id")).order_by())
    rows = list(
        scored(ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .values_list("cost_usd", "latency_s", "generations", "tokens")
    )
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    cost, latency, generations, tokens = ([float(v) for v in col] for col in columns)
    lo, hi = wilson_interval(t["passed"], t["n"])
    return {
        "total": ev.total or sum(counts.values()),
        "rows": sum(counts.values()),
        "counts": {s.value: counts.get(s.value, 0) for s in Status},
        "scored": t["n"],
        "passed": t["passed"],
        "failed": t["n"] - t["passed"],
        "pass_rate": ratio(t["passed"], t["n"]),
        "ci95": (lo, hi),
        "metrics": _metrics(t),
        "tiers": tiers(ev),
        "schema_violations": t["violations"],
        "generations_total": t["generations"],
        "schema_violation_rate": _metrics(t)["schema_violation_rate"],
        "generations": spread(generations),
        "tokens": spread(tokens),
        "cost": spread(cost),
        "cost_total": t["cost"],
        "latency": spread(latency),
        "model_calls_per_case": _metrics(t)["mean_model_calls"],
    }


def tiers(ev: Eval) -> dict[str, Any]:
    """Per tier: runs, share, accuracy (pass rate inside the tier), cost per case. Each
    tier under the word people read (runtime.TIER_WORDS): the stored "failed" tier is
    "unanswered", in the rows and as the key of its count."""
    got: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "passed": 0, "cost": 0.0})
    for row in (
        scored(ev)
        .values("tier")
        .annotate(n=Count("id"), n_passed=Count("id", filter=Q(status=Status.PASSED)), cost=Sum("cost_usd"))
        .order_by()
    ):
        into = got[row["tier"] or "failed"]
        into["n"] += row["n"]
        into["passed"] += row["n_passed"]
        into["cost"] += row["cost"] or 0.0
    total = sum(g["n"] for g in got.values())
    names = list(TIERS) + sorted(set(got) - set(TIERS))
    rows = [
        {
            "tier": TIER_WORDS.get(name, name),
            "count": int(got[name]["n"]),
            "share": ratio(got[name]["n"], total),
            "passed": int(got[name]["passed"]),
            "accuracy": ratio(got[name]["passed"], got[name]["n"]),
            "cost_total": got[name]["cost"],
            "cost_per_case": ratio(got[name]["cost"], got[name]["n"]),
        }
        for name in names
    ]
    by = {r["tier"]: r for r in rows}
    return {
        "rows": rows,
        "total": total,
        "auto": by["auto"]["count"],
        "escalated": by["escalated"]["count"],
        "unanswered": by[TIER_WORDS["failed"]]["count"],
        "auto_accuracy": by["auto"]["accuracy"],
    }


def tiers_by_model(ev: Eval) -> list[dict[str, Any]]:
    """`compute_tiers_by_model`, read once per state of the eval's rows: from
    Eval.summary["tiers_by_model"] once the eval has ended (the backend stores it then),
    before that from the cache (it reads every trace)."""
    stored = (ev.summary or {}).get("tiers_by_model") if isinstance(ev.summary, dict) else None
    if ended(ev) and isinstance(stored, list):
        return stored
    found: list[dict[str, Any]] = once_per_rows(f"tiers-by-model:v{TIERS_BY_MODEL_VERSION}", ev, compute_tiers_by_model)
    return found


def compute_tiers_by_model(ev: Eval) -> list[dict[str, Any]]:
    """Per model tier of the eval's ladder (one row named by the model without a ladder;
    "person" last with one): the cases it settled (the highest tier each needed) and how
    many passed, escalations out of it, model calls, tokens and cost spent on it. The
    runtime's own EvalReport.tiers_by_model over the stored traces, so `packforge eval
    --tiers` and this page count alike."""
    cases = [
        CaseResult(
            case_id=case_id,
            passed=status == Status.PASSED,
            status=status,
            tier="",
            output={},
            diffs=[],
            problems=[],
            blamed=None,
            path=[],
            edges=[],
            totals={},
            rejections={},
            trace=Trace.from_dict(trace) if trace else Trace(run_id="", pack=""),
            settled_by=settled_by or None,
        )
        for case_id, status, settled_by, trace in scored(ev).values_list("case_id", "status", "settled_by", "trace")
    ]
    report = EvalReport(pack="", version=ev.version, model=ev.model_spec or "pack's model", edges=[], cases=cases)
    report.ladder = _ladder_names(ev, cases)
    rows = []
    for name, row in report.tiers_by_model().items():
        tokens = row.get("prompt_tokens", 0) + row.get("completion_tokens", 0) + row.get("reasoning_tokens", 0)
        rows.append(
            {
                "tier": name,
                "person": name == PERSON,
                **row,
                "tokens": tokens,
                "accuracy": ratio(row["passed"], row["cases"]),
                "share": ratio(row["cases"], len(cases)),
            }
        )
    return rows


def _ladder_names(ev: Eval, cases: list[CaseResult]) -> list[str]:
    """The ladder's tier names as the runs recorded them (endpoint names when they ran);
    before any case finished, the endpoints' names now."""
    for c in cases:
        if c.trace.ladder:
            return list(c.trace.ladder)
    if not ev.tiers:
        return []
    names = dict(Endpoint.objects.filter(pk__in=ev.tiers).values_list("pk", "name"))
    return [names.get(pk, f"endpoint {pk}") for pk in ev.tiers]


def case_pass_rates(ev: Eval, limit: int = 200) -> list[dict[str, Any]]:
    """With repeats: each case's pass rate over its scored runs, least reliable first."""
    rows = (
        scored(ev)
        .values("case_id")
        .annotate(runs=Count("id"), n_passed=Count("id", filter=Q(status=EvalCase.Status.PASSED)))
        .order_by("case_id")
    )
    out = [
        {
            "case_id": r["case_id"],
            "runs": r["runs"],
            "passed": r["n_passed"],
            "rate": r["n_passed"] / r["runs"] if r["runs"] else 0.0,
        }
        for r in rows
    ]
    out.sort(key=lambda r: (r["rate"], r["case_id"]))
    return out[:limit]


def tool_use(ev: Eval, pack: Pack | None) -> dict[str, Any] | None:
    """Tool use over the scored runs, as the runtime's eval report counts it
    (runtime.eval_report.tool_metrics over the stored traces; gold calls from the pack at
    the eval's version). None when that pack names no tools or does not load, and when
    no run called or chose a tool."""
    if pack is None or not pack.tools:
        return None
    gold = {c.id: gold_tools(pack, c) for c in pack.cases}
    rows = scored(ev).filter(trace__isnull=False).values_list("case_id", "trace")
    used = tool_metrics((Trace.from_dict(trace or {}), gold.get(case_id)) for case_id, trace in rows.iterator())
    return used if used["tool_calls"] or used["model_calls"] else None
