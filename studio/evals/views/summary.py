"""The summary page (with the baseline panel and marking a baseline) and the tiers page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runtime import DEFAULT_TOLERANCES, METRIC_DIRECTIONS, Calibration
from studio import charts
from studio.accounts.models import Role
from studio.evals import recordings
from studio.evals.models import Eval
from studio.evals.results.calibration import calibration
from studio.evals.results.cases import tag_breakdown, tier_word
from studio.evals.results.fields import field_scores
from studio.evals.results.gate import baseline_for, gate
from studio.evals.results.summary import case_pass_rates, tiers, tiers_by_model, tool_use
from studio.evals.views.common import (
    RATES,
    context_for,
    metric_text,
    open_eval,
    pack_of,
    page,
    pct,
    summary_context,
    usd,
)
from studio.http import StudioRequest
from studio.numbers import whole_number

__all__ = ["baseline_panel", "eval_mark_baseline", "eval_summary", "eval_tiers", "eval_tools_tape", "field_panel"]

# -- summary ------------------------------------------------------------------------------

MAX_FAILING = 20  # runs that did not pass, linked from the summary; the rest through the case table
# A tier says who settled a case, not whether it was right: "unanswered" is no verdict (a
# case may expect it and pass), so its bars are the warning colour its pill has
# (studio.css), never the failures' red.
TIER_COLOURS = {"auto": "#067647", "escalated": "#dc6803", "unanswered": "#b54708"}


def baseline_panel(ev: Eval) -> dict[str, Any] | None:
    """The gate against the project's baseline; None for a cancelled eval, whose numbers
    are over the cases that ran and must never read as a complete eval's."""
    if ev.status == Eval.Status.CANCELLED:
        return None
    base = baseline_for(ev)
    if base is None:
        return None
    rows = gate(ev, base)
    for row in rows:
        name, tol = row["metric"], DEFAULT_TOLERANCES.get(row["metric"], 0.0)
        for key in ("baseline", "current", "limit"):
            row[f"{key}_text"] = metric_text(name, row[key])
        if METRIC_DIRECTIONS.get(name) == "higher":
            row["rule"] = f"may drop {100 * tol:.1f} pp"
        elif name in RATES:
            row["rule"] = f"may rise {100 * tol:.1f} pp"
        else:
            row["rule"] = f"may rise {100 * tol:.0f}%"
    return {
        "baseline": base,
        "rows": rows,
        "ok": all(r["ok"] for r in rows),
        "same_cases": (base.tags, base.untagged, base.exclude_tags, base.total)
        == (ev.tags, ev.untagged, ev.exclude_tags, ev.total),
    }


def field_panel(ev: Eval) -> dict[str, Any] | None:
    """Per-field accuracy beside the trivial baseline's, and the mean score beside its;
    None when the pack at the eval's version does not load."""
    pack = pack_of(ev)
    if pack is None:
        return None
    got = field_scores(ev, pack)
    base = got["baseline"]
    rows = []
    for name, r in got["fields"].items():
        f1 = None
        if "f1_micro" in r:
            f1 = f"{r['f1_micro']:.2f} / {r['f1_macro']:.2f}"
            f1 += f" (baseline {r['baseline_f1_micro']:.2f} / {r['baseline_f1_macro']:.2f})"
        rows.append(
            {
                "field": name,
                "compare": r["compare"],
                "cases": r["cases"],
                "accuracy_text": pct(r["accuracy"]),
                "baseline_text": pct(r["baseline_accuracy"]),
                "beats": r["accuracy"] > r["baseline_accuracy"],
                "f1_text": f1,
            }
        )
    score = got["mean_score"]
    return {
        **got,
        "rows": rows,
        "mean_score_text": "—" if score is None else f"{score:.2f}",
        "baseline_score_text": f"{base['mean_score']:.2f}",
        "baseline_pass_text": pct(base["pass_rate"]),
    }


def eval_summary(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    shown = summary_context(ev)
    tier_rows = shown["summary"]["tiers"]["rows"]
    tier_chart = charts.hbars(
        [
            charts.Bar(
                r["tier"],
                r["count"],
                f"{r['count']} ({pct(r['share'])})",
                TIER_COLOURS.get(r["tier"], "#475467"),
                reverse("evals-tiers", args=[ev.project.slug, ev.pk]),
            )
            for r in tier_rows
        ],
        label="Runs per confidence tier",
    )
    others = list(Eval.objects.filter(project=ev.project).exclude(pk=ev.pk).order_by("-created_at")[:50])
    per_case = case_pass_rates(ev) if ev.repeats > 1 else []
    cases_url = reverse("evals-cases", args=[ev.project.slug, ev.pk])
    for r in per_case:
        r["url"] = reverse("evals-case-trace", args=[ev.project.slug, ev.pk, r["case_id"], 0])
    tags = tag_breakdown(ev, pack_of(ev))
    for r in tags:
        r.update(
            pass_text=pct(r["pass_rate"]),
            url=f"{cases_url}?{urlencode({'tag': r['tag']})}",
            failed_url=f"{cases_url}?{urlencode({'tag': r['tag'], 'status': 'failed'})}",
        )
    counts = shown["summary"]["counts"]
    cancelled = (
        {"ran": counts["passed"] + counts["failed"] + counts["error"], "cancelled": counts["cancelled"]}
        if ev.status == Eval.Status.CANCELLED
        else None
    )
    failing: list[dict[str, Any]] = [
        {
            **r,
            "url": reverse("evals-case-trace", args=[ev.project.slug, ev.pk, r["case_id"], r["repeat"]]),
            "tier": tier_word(r["tier"]),
        }
        for r in ev.cases.exclude(status__in=["passed", "queued", "running", "cancelled"])
        .order_by("case_id", "repeat")
        .values("case_id", "repeat", "status", "blamed", "tier")[:MAX_FAILING]
    ]
    context = context_for(
        ev,
        role,
        "summary",
        tier_chart=tier_chart,
        others=others,
        gate=baseline_panel(ev),
        per_case=per_case,
        tags=tags,
        cancelled=cancelled,
        failing=failing,
        cases_url=cases_url,
        fields=field_panel(ev),
        ladder=model_tier_rows(ev) if ev.tiers else [],
        tools=recordings.tools_summary(ev) if ev.tools_mode else None,
        tool_use=tool_use(ev, pack_of(ev)),
        **shown,
    )
    return page(request, "evals/results_summary.html", context, fragments=("baseline-panel",))


@require_POST
def eval_mark_baseline(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    """Authors make a finished eval the project's baseline (or clear it)."""
    ev, role = open_eval(request, slug, eval_id)
    if not role.can_edit:
        raise PermissionDenied(f"your role on {ev.project.slug} is {role.value}; only authors choose the baseline")
    clear = request.POST.get("action") == "clear"
    if not clear and ev.status != Eval.Status.DONE:
        messages.error(request, f"Eval {ev.pk} is {ev.status}; only a finished eval can be the baseline.")
        return _after_baseline(request, ev, role, status=400)
    try:
        with transaction.atomic():
            if clear:
                Eval.objects.filter(pk=ev.pk).update(is_baseline=False)
            else:
                Eval.objects.filter(project=ev.project, is_baseline=True).exclude(pk=ev.pk).update(is_baseline=False)
                Eval.objects.filter(pk=ev.pk).update(is_baseline=True)
    except IntegrityError:
        messages.error(request, "Another baseline was chosen at the same moment; reload and try again.")
        return _after_baseline(request, ev, role, status=409)
    ev.is_baseline = not clear
    messages.success(
        request,
        f"Eval {ev.pk} is no longer the baseline."
        if clear
        else f"Eval {ev.pk} is now the baseline of {ev.project.slug}: later evals are gated against it.",
    )
    return _after_baseline(request, ev, role)


def _after_baseline(request: StudioRequest, ev: Eval, role: Role, status: int = 200) -> HttpResponse:
    if request.htmx:
        context = context_for(ev, role, "summary", gate=baseline_panel(ev), flash=True)
        return render(request, "evals/results_summary.html#baseline-panel", context, status=status)
    if status == 200:
        return redirect("evals-summary", ev.project.slug, ev.pk)
    response = eval_summary(request, ev.project.slug, ev.pk)  # the page, with the message, under the error status
    response.status_code = status
    return response


def eval_tools_tape(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    """The eval's tool recording (JSONL, one call a line): what `packforge eval
    --replay-tools FILE` reads too. 404 until a recording eval has ended."""
    ev, _ = open_eval(request, slug, eval_id)
    if not ev.tape:
        raise Http404("this eval has no tool recording (yet)")
    response = HttpResponse(ev.tape, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="eval-{ev.pk}-tools.jsonl"'
    return response


# -- tiers --------------------------------------------------------------------------------


def eval_tiers(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    split = tiers(ev)
    for r in split["rows"]:
        r.update(
            share_text=pct(r["share"]),
            accuracy_text=pct(r["accuracy"]),
            cost_per_case_text=usd(r["cost_per_case"]),
            cost_total_text=usd(r["cost_total"]),
        )
    chart = charts.hbars(
        [
            charts.Bar(
                r["tier"], r["count"], f"{r['count']} ({pct(r['share'])})", TIER_COLOURS.get(r["tier"], "#475467")
            )
            for r in split["rows"]
        ],
        label="Runs per confidence tier",
    )
    accuracy = charts.hbars(
        [
            charts.Bar(r["tier"], r["accuracy"] or 0, pct(r["accuracy"]), TIER_COLOURS.get(r["tier"], "#475467"))
            for r in split["rows"]
        ],
        label="Accuracy inside each tier",
        max_value=1.0,
    )
    target = whole_number(request.GET.get("target", "95"), minimum=1, maximum=100) or 95
    pack = pack_of(ev)
    gated = [_gated_node(cal, target / 100) for cal in (calibration(ev, pack) if pack is not None else {}).values()]
    context = context_for(
        ev,
        role,
        "tiers",
        split=split,
        chart=chart,
        accuracy=accuracy,
        gated=gated,
        target=target,
        ladder=model_tier_rows(ev),
    )
    return page(request, "evals/results_tiers.html", context)


def model_tier_rows(ev: Eval) -> list[dict[str, Any]]:
    """The per-model-tier table (results.summary.tiers_by_model) with its texts."""
    rows = tiers_by_model(ev)
    for r in rows:
        r.update(
            share_text=pct(r["share"]),
            accuracy_text=pct(r["accuracy"]),
            cost_text="—" if r["person"] else usd(r["cost_usd"]),
            tokens_text="—" if r["person"] else f"{r['tokens']:,}",
            calls_text="—" if r["person"] else str(r["model_calls"]),
            escalations_text="—"
            if r["person"]
            else f"{r['escalations']['fail']} fail, {r['escalations']['unsure']} unsure",
        )
    return rows


def _gated_node(cal: Calibration, target: float) -> dict[str, Any]:
    """One gated node's calibration as the tiers page shows it: the curve of auto-tier
    accuracy against auto share, the proposed threshold marked, the reliability table."""
    doc = cal.to_dict(target)
    proposed, current = doc["proposed"], doc["current"]
    marks = []
    if current is not None and current["auto"]:
        marks.append(
            charts.Mark(
                f"current min {current['threshold']:.4g}", current["auto_share"], current["auto_accuracy"], "#475467"
            )
        )
    if proposed["threshold"] is not None:
        marks.append(
            charts.Mark(f"proposed min {proposed['threshold']:.4g}", proposed["auto_share"], proposed["auto_accuracy"])
        )
    curve = charts.tradeoff(
        [
            (
                pt["auto_share"],
                pt["auto_accuracy"],
                f"min {pt['threshold']:.4g}: {pct(pt['auto_share'])} automatic at {pct(pt['auto_accuracy'])} accuracy",
            )
            for pt in doc["curve"]
        ],
        label=f"{cal.node}: accuracy inside the auto tier against the share of runs let through",
        x_label="runs that go through automatically (auto share)",
        y_label=f"accuracy of {cal.field} inside the auto tier",
        marks=marks,
        target=target,
    )
    bins = [
        {
            **b,
            "range": f"{b['low']:.1f}–{b['high']:.1f}",
            "mean_p_text": "—" if b["mean_p"] is None else f"{b['mean_p']:.3f}",
            "accuracy_text": pct(b["accuracy"]),
        }
        for b in doc["bins"]
    ]
    return {
        **doc,
        "node": cal.node,
        "curve_svg": curve,
        "bins": bins,
        "accuracy_text": pct(doc["accuracy"]),
        "low_text": pct(proposed.get("accuracy_low")),
        "proposed_text": "—" if proposed["threshold"] is None else f"{proposed['threshold']:.4g}",
        "min_text": "—" if doc["min"] is None else f"{doc['min']:.4g}",
    }
