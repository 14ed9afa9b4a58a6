"""The per-node blame page and the branch coverage page, each over the pack's graph."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.urls import reverse

from runtime import NODE_KINDS
from studio import charts
from studio.evals.results.nodes import coverage, node_blame
from studio.evals.views.common import (
    context_for,
    dur,
    open_eval,
    pack_of,
    page,
    pct,
    usd,
)
from studio.http import StudioRequest
from studio.projects.graph_svg import draw

__all__ = ["eval_blame", "eval_coverage"]

# -- per-node blame -----------------------------------------------------------------------

MAX_REASONS = 5
MAX_CASES = 5  # blamed runs linked from each node's row; the rest through the case table


def _terminal(kind: str) -> bool:
    """An end-like node (the runtime's kind flag): it decides nothing, so it gets no bar of its own."""
    found = NODE_KINDS.get(kind)
    return found is not None and found.terminal


def eval_blame(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    pack = pack_of(ev)
    blame = node_blame(ev, pack)
    for r in blame["nodes"]:
        r.update(
            share_text=pct(r["share"]),
            rejection_rate_text=pct(r["rejection_rate"]),
            top_reasons=r["reasons"][:MAX_REASONS],
            more_reasons=max(0, len(r["reasons"]) - MAX_REASONS),
            latency_text=dur(r["latency_s"]),
            cost_text=usd(r["cost_usd"]),
            tool_latency_text=dur(r["tool_latency_s"]),
        )
    cases_url = reverse("evals-cases", args=[ev.project.slug, ev.pk])
    blamed: dict[str, list[dict[str, Any]]] = {}
    for row in (
        ev.cases.exclude(blamed="")
        .exclude(status__in=["passed", "queued", "running", "cancelled"])
        .order_by("case_id", "repeat")
        .values("blamed", "case_id", "repeat")[:2000]
    ):
        shown = blamed.setdefault(row["blamed"], [])
        if len(shown) < MAX_CASES:
            shown.append(
                {
                    **row,
                    "url": reverse("evals-case-trace", args=[ev.project.slug, ev.pk, row["case_id"], row["repeat"]]),
                }
            )
    for r in blame["nodes"]:
        r["cases"] = blamed.get(r["node"], [])
        r["cases_url"] = f"{cases_url}?{urlencode({'blamed': r['node']})}"
    notes = {r["node"]: f"{pct(r['share'])} · {r['failures']} failed" for r in blame["nodes"] if r["failures"]}
    drawing = (
        draw(
            pack,
            label=f"The graph of {ev.project.slug}, coloured by share of failures blamed",
            shares=blame["shares"],
            notes=notes,
        )
        if pack is not None
        else None
    )
    bars = (
        charts.hbars(
            [
                charts.Bar(r["node"], r["failures"], f"{r['failures']} ({pct(r['share'])})", "#b42318")
                for r in blame["nodes"]
                if r["failures"] or (r["in_pack"] and not _terminal(r["kind"]))
            ],
            label="Failures blamed per node",
        )
        if blame["failures"]
        else None
    )
    context = context_for(ev, role, "blame", blame=blame, pack=pack, drawing=drawing, bars=bars)
    return page(request, "evals/results_blame.html", context)


# -- coverage -----------------------------------------------------------------------------


def eval_coverage(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    pack = pack_of(ev)
    cov = coverage(ev, pack)
    for e in cov["edges"]:
        e["share_text"] = pct(e["share"])
    drawing = (
        draw(
            pack,
            label=f"The graph of {ev.project.slug}: edges by runs that took them",
            edge_counts=cov["counts"],
            runs=cov["runs"],
        )
        if pack is not None
        else None
    )
    return page(
        request, "evals/results_coverage.html", context_for(ev, role, "coverage", cov=cov, pack=pack, drawing=drawing)
    )
