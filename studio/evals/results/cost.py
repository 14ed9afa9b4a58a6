"""The cost page's numbers: one sorted page of runs and the spread of cost, tokens and latency."""

from __future__ import annotations

import math
from typing import Any

from django.db.models import F

from studio.evals.models import Eval, EvalCase
from studio.evals.results.cases import tier_word
from studio.evals.results.common import SCORED, scored, spread

__all__ = ["SORTS", "cost_summary", "cost_table"]


# -- cost per case ------------------------------------------------------------------------

SORTS = {
    "case": ("case_id", "repeat"),
    "status": ("status", "case_id", "repeat"),
    "cost": ("cost_usd", "case_id", "repeat"),
    "tokens": ("tokens", "case_id", "repeat"),
    "latency": ("latency_s", "case_id", "repeat"),
    "generations": ("generations", "case_id", "repeat"),
}


def cost_table(
    ev: Eval, *, sort: str = "cost", direction: str = "desc", page: int = 1, per_page: int = 100
) -> dict[str, Any]:
    """One page of the eval's runs, sorted by a whitelisted column."""
    sort = sort if sort in SORTS else "cost"
    direction = direction if direction in ("asc", "desc") else "desc"
    count = EvalCase.objects.filter(eval=ev).count()
    pages = max(1, math.ceil(count / per_page))
    page = min(max(1, page), pages)
    prefix = "-" if direction == "desc" else ""
    rows = list(
        EvalCase.objects.filter(eval=ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .order_by(*(prefix + f for f in SORTS[sort]))
        .values(
            "case_id",
            "repeat",
            "status",
            "tier",
            "blamed",
            "cost_usd",
            "tokens",
            "prompt_tokens",
            "completion_tokens",
            "reasoning_tokens",
            "latency_s",
            "generations",
            "model_calls",
        )[(page - 1) * per_page : page * per_page]
    )
    for row in rows:  # the tier's word, as every other page says it ("unanswered", not "failed")
        row["tier"] = tier_word(row["tier"]) if row["status"] in SCORED else ""
    return {
        "rows": rows,
        "count": count,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "sort": sort,
        "dir": direction,
    }


def cost_summary(ev: Eval) -> dict[str, Any]:
    """Cost, tokens and latency per scored run (mean, p50, p95), and every run's cost for
    the histogram: one query of three numbers per run."""
    rows = list(
        scored(ev)
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens") + F("reasoning_tokens"))
        .values_list("cost_usd", "tokens", "latency_s")
    )
    cost = [float(r[0]) for r in rows]
    return {
        "scored": len(rows),
        "values": cost,
        "cost": spread(cost),
        "cost_total": sum(cost),
        "tokens": spread([float(r[1]) for r in rows]),
        "latency": spread([float(r[2]) for r in rows]),
    }
