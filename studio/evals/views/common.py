"""What every eval result page shares: opening the eval (404 for a stranger), the pack at
its version, the page-or-fragment response, the number formats, and the summary context
the live eval page includes. The pages themselves: summary.py (summary, tiers, the
baseline), blame.py (blame, coverage), cost.py (cost, one case's trace), compare.py
(compare, history).

An eval's result pages: summary, per-node blame, branch coverage, tiers, cost per
case, one case's trace, two evals compared, a project's history, the baseline.

Function views that return early. Every page is login-required (the middleware), gives
a stranger 404 and lets every member read. Rejected generations (the text of an attempt
that failed verification) are shown to authors only: others see that an attempt was
rejected and why. An htmx request gets the fragment named after the DOM id it replaces:
`results-page` (everything below the site header) or, on the cost page, `cost-table`."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from runtime import Pack
from studio.accounts.access import eval_for
from studio.accounts.models import Role
from studio.evals.models import Eval
from studio.evals.results.summary import summarize
from studio.http import StudioRequest
from studio.numbers import pct
from studio.projects.storage import PackRepo, StorageError
from studio.projects.validation import PACK_PREFIX, validate_files

__all__ = [
    "FRAGMENT_FRAME",
    "RATES",
    "SHORT",
    "compact",
    "context_for",
    "delta_text",
    "dur",
    "eval_page_url",
    "metric_text",
    "open_eval",
    "pack_of",
    "page",
    "pct",
    "summary_context",
    "usd",
]

SHORT = 10
FRAGMENT_FRAME = "_fragment.html"  # what a section base extends for an htmx swap: no site header


# -- shared -------------------------------------------------------------------------------


def open_eval(request: StudioRequest, slug: str, eval_id: int) -> tuple[Eval, Role]:
    """The eval and the user's role on its project. Unknown eval, another project's, or a stranger: 404."""
    return eval_for(request.user, eval_id, slug=slug)


@lru_cache(maxsize=32)
def _pack_at(repo_path: str, sha: str) -> Pack | None:
    # A commit never changes, so its loaded pack can be kept (read-only) between requests.
    try:
        files = PackRepo(Path(repo_path)).files(sha, prefix=PACK_PREFIX)
    except StorageError:
        return None
    return validate_files(files)[0]


def pack_of(ev: Eval) -> Pack | None:
    """The pack at the eval's version, or None when it is gone or does not load."""
    if len(ev.version) == 40:
        return _pack_at(str(ev.project.repo_path), ev.version)
    try:
        repo = PackRepo(ev.project.repo_path)
        return validate_files(repo.files(repo.resolve(ev.version), prefix=PACK_PREFIX))[0]
    except StorageError:
        return None


def eval_page_url(ev: Eval) -> str | None:
    """The live eval page (progress, cancel) when its view is mounted."""
    try:
        return reverse("evals-detail", args=[ev.project.slug, ev.pk])
    except NoReverseMatch:
        return None


def context_for(ev: Eval, role: Role, active: str, **extra: Any) -> dict[str, Any]:
    return {
        "ev": ev,
        "project": ev.project,
        "role": role,
        "can_edit": role.can_edit,
        "active": active,
        "short": ev.version[:SHORT],
        "eval_page": eval_page_url(ev),
        **extra,
    }


def page(
    request: StudioRequest, template: str, context: dict[str, Any], status: int = 200, fragments: tuple[str, ...] = ()
) -> HttpResponse:
    """The full page; for htmx, the fragment its target names: `results-page` (the
    default: the section of evals/base.html, framed without the site header) or one of
    the page's partials named in `fragments`."""
    if not request.htmx:
        return render(request, template, context, status=status)
    if request.htmx.target in fragments:
        return render(request, f"{template}#{request.htmx.target}", context, status=status)
    return render(request, template, {**context, "frame": FRAGMENT_FRAME}, status=status)


def compact(value: Any) -> str:
    """A JSON value on one line, for a table cell ("" for None)."""
    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def usd(v: float | None) -> str:
    if v is None:
        return "—"
    if v == 0:
        return "$0"
    return f"${v:.6f}" if abs(v) < 0.01 else f"${v:.4f}"


def dur(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


RATES = {"pass_rate", "escalation_rate", "schema_violation_rate"}


def metric_text(name: str, v: float) -> str:
    if name in RATES or name.startswith("tier share"):
        return pct(v)
    return usd(v) if name == "cost_per_case" else f"{v:.2f}"


def delta_text(name: str, delta: float, relative: float | None) -> str:
    if name in RATES or name.startswith("tier share"):
        return f"{100 * delta:+.1f} pp"
    rel = f" ({100 * relative:+.1f}%)" if relative is not None else ""
    if name == "cost_per_case":
        return ("+" if delta >= 0 else "−") + usd(abs(delta)) + rel
    return f"{delta:+.2f}{rel}"


def summary_context(ev: Eval) -> dict[str, Any]:
    """`summary` and its `show` strings: what the `eval-summary` fragment of
    evals/results_summary.html needs (the live eval page may include it)."""
    summary = summarize(ev)
    lo, hi = summary["ci95"]
    show = {
        "pass_rate": pct(summary["pass_rate"]),
        "ci_low": pct(lo),
        "ci_high": pct(hi),
        "auto_accuracy": pct(summary["tiers"]["auto_accuracy"]),
        "schema_violation_rate": pct(summary["schema_violation_rate"]),
        "cost_mean": usd(summary["cost"]["mean"]),
        "cost_p50": usd(summary["cost"]["p50"]),
        "cost_p95": usd(summary["cost"]["p95"]),
        "cost_total": usd(summary["cost_total"]),
        "latency_p50": dur(summary["latency"]["p50"]),
        "latency_p95": dur(summary["latency"]["p95"]),
        "latency_mean": dur(summary["latency"]["mean"]),
    }
    return {"summary": summary, "show": show}
