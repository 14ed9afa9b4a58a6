"""/metrics' per-deployment health gauges: the deployment page's "Health over time"
numbers (studio/deployments/health.py, same definitions) over the runs submitted in the
last WINDOW (24 hours), one sample per deployment (per tier for the tier split), and the
review backlog now. Four queries whatever the number of runs. docs/serving.md, "Metrics"."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from prometheus_client.core import GaugeMetricFamily, Metric

from studio.deployments import health

WINDOW = timedelta(hours=24)

__all__ = ["WINDOW", "health_families"]


def health_families(now: datetime) -> Iterator[Metric]:
    found = health.recent(now - WINDOW, now)
    window = "submitted in the last 24 hours"
    runs = _gauge("recent_runs", f"Served runs {window}.")
    auto = _gauge(
        "auto_share",
        f"Share of the runs {window} that are done, failed or waiting which a model tier settled (no person).",
    )
    escalation = _gauge(
        "escalation_rate", f"Share of the runs {window} that are done, failed or waiting which escalated at least once."
    )
    tiers = _gauge(
        "tier_share",
        f"Share of the runs {window} that are done, failed or waiting which each tier settled ('person' included).",
        "tier",
    )
    p50 = _gauge(
        "latency_p50_seconds", f"Median submission-to-end time of the runs {window} that ended without a person."
    )
    p95 = _gauge(
        "latency_p95_seconds",
        f"95th percentile submission-to-end time of the runs {window} that ended without a person.",
    )
    cost = _gauge(
        "cost_per_run_usd",
        f"Mean model cost of the ended runs {window} whose trace holds a cost (0 when endpoints have no price).",
    )
    backlog = _gauge("review_backlog", "Review items not yet decided, now.")
    for name, b in found.items():
        runs.add_metric([name], b.runs)
        backlog.add_metric([name], b.review_backlog)
        # A share, a percentile or a mean of nothing is left out, not written as 0.
        if b.auto_share is not None:
            auto.add_metric([name], b.auto_share)
        if b.escalation_rate is not None:
            escalation.add_metric([name], b.escalation_rate)
        for t in b.tiers:
            tiers.add_metric([name, t.tier], t.share)
        if b.latency_p50_s is not None and b.latency_p95_s is not None:
            p50.add_metric([name], b.latency_p50_s)
            p95.add_metric([name], b.latency_p95_s)
        if b.cost_per_run_usd is not None:
            cost.add_metric([name], b.cost_per_run_usd)
    yield from (runs, auto, escalation, tiers, p50, p95, cost, backlog)


def _gauge(name: str, text: str, *more_labels: str) -> GaugeMetricFamily:
    """packforge_deployment_<name>, labelled by deployment (and `more_labels`)."""
    return GaugeMetricFamily(f"packforge_deployment_{name}", text, labels=["deployment", *more_labels])
