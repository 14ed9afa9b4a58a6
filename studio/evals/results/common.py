"""What every result page shares: which rows are scored, the tier names, how an edge is named,
and the versions of the trace shape and of the stored per-node totals. Below every other
module of studio.evals.results, which import it and never each other in a circle."""

from __future__ import annotations

from django.db.models import QuerySet

from runtime import Edge, percentile
from studio.evals.models import Eval, EvalCase

__all__ = [
    "NODE_STATS_VERSION",
    "READS_TRACE_VERSION",
    "SCORED",
    "TIERS",
    "Status",
    "edge_name",
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
