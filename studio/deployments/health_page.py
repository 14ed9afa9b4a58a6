"""The deployment page's "Health over time" section: health.py's numbers per hour or per
day, drawn as line charts (studio/charts.py, like the eval pages') and written in a table.
The bucket is a plain GET parameter (`?bucket=hour`); anything else is the 7-day view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.safestring import SafeString

from studio import charts
from studio.deployments import health
from studio.deployments.models import Deployment
from studio.evals.views.common import dur, usd
from studio.numbers import pct

__all__ = ["section"]


def _label(b: health.Bucket, bucket: str) -> str:
    return b.start.strftime("%m-%d" if bucket == "day" else "%H:00")


def _when(b: health.Bucket, bucket: str) -> str:
    return b.start.strftime("%Y-%m-%d" if bucket == "day" else "%Y-%m-%d %H:00")


def _share(v: float) -> str:
    return f"{100 * v:.0f}%"


def _whole(v: float) -> str:
    return f"{v:.0f}"


def _seconds(v: float) -> str:
    return f"{v:.3g}"


def _points(
    found: health.Health, value: Callable[[health.Bucket], float | None], show: Callable[[float], str], what: str
) -> list[charts.Point]:
    points = []
    for i, b in enumerate(found.buckets):
        v = value(b)
        if v is not None:
            points.append(charts.Point(i, v, f"{_when(b, found.bucket)}: {what} {show(v)} ({b.runs} runs)"))
    return points


def _tier_share(tier: str) -> Callable[[health.Bucket], float | None]:
    def share(b: health.Bucket) -> float | None:
        if not b.outcomes:
            return None
        return next((t.share for t in b.tiers if t.tier == tier), 0.0)

    return share


def _cost(found: health.Health, b: health.Bucket) -> str:
    if b.cost_per_run_usd is None:
        return "unknown"
    return usd(b.cost_per_run_usd) if found.priced else "no price set"


def _row(found: health.Health, b: health.Bucket, when: str) -> dict[str, Any]:
    return {
        "when": when,
        "runs": b.runs,
        "outcomes": b.outcomes,
        "auto_share": pct(b.auto_share),
        "escalation_rate": pct(b.escalation_rate),
        "reasons": [f"{r.reason} ×{r.count}" for r in b.reasons[:3]],
        "tiers": [f"{t.tier} {pct(t.share)}" for t in b.tiers],
        "p50": dur(b.latency_p50_s),
        "p95": dur(b.latency_p95_s),
        "cost": _cost(found, b),
        "backlog": b.review_backlog,
    }


def _charts(found: health.Health) -> list[SafeString]:
    labels = [_label(b, found.bucket) for b in found.buckets]
    span = f"{_when(found.buckets[0], found.bucket)} → {_when(found.buckets[-1], found.bucket)}"
    x_title = f"{found.bucket} (UTC), {span}"

    def plot(title: str, series: list[tuple[str, list[charts.Point]]], y_label: str, **options: Any) -> SafeString:
        return charts.line_plot(
            labels, series, label=title, y_label=y_label, x_title=x_title, empty="no runs in this window", **options
        )

    def count(b: health.Bucket) -> float:
        return float(b.runs)

    def backlog(b: health.Bucket) -> float:
        return float(b.review_backlog)

    made = [
        plot(
            "Runs and review backlog",
            [
                ("runs submitted", _points(found, count, _whole, "runs")),
                ("review backlog", _points(found, backlog, _whole, "open review items")),
            ],
            "count",
        ),
        plot(
            "Auto share and escalation rate",
            [
                ("auto share", _points(found, lambda b: b.auto_share, _share, "auto share")),
                ("escalation rate", _points(found, lambda b: b.escalation_rate, _share, "escalated")),
            ],
            "share of outcomes",
            y_max=1.0,
            fmt=_share,
        ),
        plot(
            "Tier split",
            [(t.tier, _points(found, _tier_share(t.tier), _share, t.tier)) for t in found.total.tiers],
            "share settled by tier",
            y_max=1.0,
            fmt=_share,
        ),
        plot(
            "Latency",
            [
                ("p50", _points(found, lambda b: b.latency_p50_s, _seconds, "p50 s")),
                ("p95", _points(found, lambda b: b.latency_p95_s, _seconds, "p95 s")),
            ],
            "seconds",
            fmt=_seconds,
        ),
    ]
    if found.priced:
        cost = _points(found, lambda b: b.cost_per_run_usd, usd, "cost per run")
        made.append(plot("Cost per run", [("cost per run", cost)], "USD per run", fmt=usd))
    return made


def section(deployment: Deployment, bucket: str | None, *, ladder: list[str] | None = None) -> dict[str, Any]:
    """The section's context: the bucket, the other bucket's name, charts, table rows."""
    chosen = bucket if bucket in health.BUCKETS else "day"
    found = health.health(deployment, health.window(chosen), ladder=ladder)
    return {
        "bucket": chosen,
        "since": found.since,
        "until": found.until,
        "priced": found.priced,
        "charts": _charts(found),
        "rows": [_row(found, b, _when(b, chosen)) for b in found.buckets],
        "total": _row(found, found.total, "whole window"),
    }
