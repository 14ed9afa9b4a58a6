"""The compare and history pages' numbers: two evals' outcomes paired, and pass rate and cost
per case over pack versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, Sum

from runtime import METRIC_DIRECTIONS, mcnemar_exact, paired_outcomes, wilson_interval
from studio.errors import Refused
from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import SCORED, Status, ratio
from studio.evals.results.summary import metrics_of

__all__ = ["NotComparable", "compare", "history"]


# -- comparing two evals ------------------------------------------------------------------


class NotComparable(Refused):
    """Two evals whose outcomes cannot be paired; the message says why, for a person."""


def _sample(ids: set[str], k: int = 3) -> str:
    shown = sorted(ids)[:k]
    return ", ".join(shown) + (" …" if len(ids) > k else "")


@dataclass
class _Side:
    runs: dict[tuple[str, int], str]

    @property
    def case_ids(self) -> set[str]:
        return {cid for cid, _ in self.runs}

    def rate(self, case_id: str) -> float | None:
        got = [s == Status.PASSED for (cid, _), s in self.runs.items() if cid == case_id and s in SCORED]
        return sum(got) / len(got) if got else None


def compare(a: Eval, b: Eval, *, common_only: bool = False) -> dict[str, Any]:
    """`a` before, `b` after. Outcomes are paired by (case, repeat) when both evals ran the
    same repeats, else by case, a case passing when most of its repeats pass. Fixed: failed
    in a, passes in b; broken: the reverse. The p-value is the exact McNemar test on them.
    Evals of different case sets are refused, unless `common_only`: then only the cases
    both ran are paired, and the others are listed apart (`only_a`, `only_b`), never
    counted as fixed or broken (a proposal's checks, whose evalset may change)."""
    if a.pk == b.pk:
        raise NotComparable("Both sides are the same eval; choose two different evals.")
    if a.project_id != b.project_id:
        raise NotComparable(
            f"Eval {a.pk} belongs to project {a.project.slug} and eval {b.pk} to {b.project.slug}; "
            "only evals of one project (the same evalset) can be compared."
        )
    sa = _Side({(c, r): s for c, r, s in a.cases.values_list("case_id", "repeat", "status")})
    sb = _Side({(c, r): s for c, r, s in b.cases.values_list("case_id", "repeat", "status")})
    only_a, only_b = sa.case_ids - sb.case_ids, sb.case_ids - sa.case_ids
    if common_only:
        sa = _Side({k: v for k, v in sa.runs.items() if k[0] not in only_a})
        sb = _Side({k: v for k, v in sb.runs.items() if k[0] not in only_b})
    elif only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} case(s) only in eval {a.pk} ({_sample(only_a)})")
        if only_b:
            parts.append(f"{len(only_b)} case(s) only in eval {b.pk} ({_sample(only_b)})")
        raise NotComparable(
            "These evals ran different case sets: " + "; ".join(parts) + ". Compare evals of the same cases "
            "(the same tags), or run the missing cases."
        )
    by_run = set(sa.runs) == set(sb.runs)
    before: list[bool] = []
    after: list[bool] = []
    fixed: list[dict[str, Any]] = []
    broken: list[dict[str, Any]] = []
    skipped = 0
    if by_run:
        for key in sorted(sa.runs):
            x, y = sa.runs[key], sb.runs[key]
            if x not in SCORED or y not in SCORED:
                skipped += 1
                continue
            was, now = x == Status.PASSED, y == Status.PASSED
            before.append(was)
            after.append(now)
            if was != now:
                (fixed if now else broken).append(
                    {"case_id": key[0], "repeat": key[1], "before": float(was), "after": float(now)}
                )
    else:
        for case_id in sorted(sa.case_ids):
            rate_a, rate_b = sa.rate(case_id), sb.rate(case_id)
            if rate_a is None or rate_b is None:
                skipped += 1
                continue
            was, now = rate_a > 0.5, rate_b > 0.5
            before.append(was)
            after.append(now)
            if was != now:
                (fixed if now else broken).append(
                    {"case_id": case_id, "repeat": None, "before": rate_a, "after": rate_b}
                )
    both, n_fixed, n_broken, neither = paired_outcomes(before, after)
    ma, mb = metrics_of(a), metrics_of(b)
    deltas = []
    for name in ma:
        delta = mb[name] - ma[name]
        better = None if abs(delta) < 1e-12 else (delta > 0) == (METRIC_DIRECTIONS.get(name) == "higher")
        deltas.append(
            {
                "metric": name,
                "a": ma[name],
                "b": mb[name],
                "delta": delta,
                "relative": ratio(delta, ma[name]),
                "better": better,
            }
        )
    pa, pb = sum(before), sum(after)
    return {
        "a": a,
        "b": b,
        "paired_by": "run" if by_run else "case",
        "pairs": len(before),
        "skipped": skipped,
        "both_pass": both,
        "fixed": fixed,
        "broken": broken,
        "both_fail": neither,
        "n_fixed": n_fixed,
        "n_broken": n_broken,
        "p_value": mcnemar_exact(n_fixed, n_broken),
        "pass_a": pa,
        "pass_b": pb,
        "ci_a": wilson_interval(pa, len(before)),
        "ci_b": wilson_interval(pb, len(after)),
        "metrics": deltas,
        "only_a": sorted(only_a),
        "only_b": sorted(only_b),
    }


# -- history over versions ----------------------------------------------------------------


def history(project: Any, order: list[str] | None = None) -> dict[str, Any]:
    """Pass rate and cost per case of every eval of `project`, grouped by pack version.

    `order` lists version shas oldest first (the repository's log); versions not in it
    follow, by their first eval. One series per model; for a version evaluated more than
    once on one model, the latest eval with scored runs is the point."""
    evals = list(Eval.objects.filter(project=project).order_by("created_at", "pk"))
    agg = {
        row["eval"]: row
        for row in (
            EvalCase.objects.filter(eval__project=project, status__in=SCORED)
            .values("eval")
            .annotate(n=Count("id"), n_passed=Count("id", filter=Q(status=Status.PASSED)), cost=Sum("cost_usd"))
            .order_by()
        )
    }
    rank = {sha: i for i, sha in enumerate(order or [])}
    seen: list[str] = []
    for ev in evals:
        if ev.version not in seen:
            seen.append(ev.version)
    versions = sorted(seen, key=lambda v: (0, rank[v], 0) if v in rank else (1, 0, seen.index(v)))
    index = {v: i for i, v in enumerate(versions)}
    rows = []
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in evals:
        got = agg.get(ev.pk)
        n = got["n"] if got else 0
        row = {
            "eval": ev,
            "version": ev.version,
            "x": index[ev.version],
            "model": ev.model_spec,
            "runs": n,
            "pass_rate": ratio(got["n_passed"], n) if got else None,
            "ci95": wilson_interval(got["n_passed"], n) if got else (0.0, 1.0),
            "cost_per_case": ratio(got["cost"] or 0.0, n) if got else None,
        }
        rows.append(row)
        if n:
            latest[(ev.model_spec, ev.version)] = row
    series: dict[str, list[dict[str, Any]]] = {}
    for (model, _), row in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[1]["x"])):
        series.setdefault(model, []).append(row)
    return {"versions": versions, "evals": rows, "series": [{"model": m, "points": pts} for m, pts in series.items()]}
