"""What every result page shares: which rows are scored, the tier names, how an edge is named,
and the versions of the trace shape and of the stored per-node totals. Below every other
module of studio.evals.results, which import it and never each other in a circle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, QuerySet

from runtime import Edge, percentile
from studio.evals.models import Eval, EvalCase

__all__ = [
    "NODE_STATS_VERSION",
    "READS_TRACE_VERSION",
    "SCORED",
    "TIERS",
    "Status",
    "edge_name",
    "ended",
    "fingerprint",
    "once_per_rows",
    "ratio",
    "scored",
    "spread",
]

Status = EvalCase.Status
SCORED = (Status.PASSED, Status.FAILED, Status.ERROR)
TIERS = ("auto", "escalated", "failed")
# The SQL in nodes.py reads the runtime's trace dict (Trace.to_dict) at this version: its
# "attempts" list and their node, ok, category, reason, tokens, latency_s and cost_usd.
READS_TRACE_VERSION = 1  # runtime.TRACE_VERSION when this SQL was written
NODE_STATS_VERSION = 2  # 2: cached_tokens per node


def scored(ev: Eval) -> QuerySet[EvalCase]:
    return EvalCase.objects.filter(eval=ev, status__in=SCORED)


def edge_name(e: Edge) -> str:
    """An edge in words, as runtime.eval_report names it in reports: `a -> b [when]` / `a -> b (on_fail)`."""
    kind = f" ({e.kind})" if e.kind != "next" else (f" [{e.when.source}]" if e.when else "")
    return f"{e.source} -> {e.target}{kind}"


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": sum(values) / len(values) if values else 0.0,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
    }


def ended(ev: Eval) -> bool:
    """Whether the eval's scored rows have stopped changing (done, or cancelled and closed)."""
    return ev.status == Eval.Status.DONE or (ev.status == Eval.Status.CANCELLED and ev.finished_at is not None)


def fingerprint(ev: Eval, *, every_row: bool = False) -> str:
    """Changes whenever a scored row is added or re-finished; cheap (one indexed aggregate).
    With `every_row`, also when any row changes status (queued, running, cancelled, ...)."""
    rows = EvalCase.objects.filter(eval=ev) if every_row else scored(ev)
    row = rows.aggregate(n=Count("id"), last=Max("finished_at"), top=Max("id"))
    last = row["last"].timestamp() if row["last"] else 0
    found = f"{ev.pk}:{ev.created_at.timestamp()}:{row['n']}:{row['top']}:{last}"
    if every_row:
        per_status = sorted(rows.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
        found += ":" + ",".join(f"{status}={n}" for status, n in per_status)
    return found


def once_per_rows(name: str, ev: Eval, compute: Callable[[Eval], Any], *, every_row: bool = False) -> Any:
    """`compute(ev)` (JSON-serialisable, reads every trace), kept in Django's cache under a
    key that changes with the scored rows (`every_row`: with every row's status), so a
    page reads the traces once per state."""
    key = f"packforge:evals:{name}:{fingerprint(ev, every_row=every_row)}"
    found = cache.get(key)
    if found is None:
        found = compute(ev)
        cache.set(key, found, timeout=7 * 24 * 3600)
    return found
