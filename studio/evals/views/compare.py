"""Two evals of one project compared, and a project's pass rate and cost over its versions."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from studio import charts
from studio.accounts.access import eval_for, project_for
from studio.evals.models import Eval
from studio.evals.results.cases import compare_cases
from studio.evals.results.compare import NotComparable, compare, history
from studio.evals.views.common import (
    SHORT,
    compact,
    delta_text,
    metric_text,
    open_eval,
    pack_of,
    pct,
    usd,
)
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.projects.storage import PackRepo, StorageError

__all__ = ["eval_compare", "eval_history"]

# -- compare ------------------------------------------------------------------------------

MAX_PAIRS = 500  # case rows side by side on the page; the API's /api/evals/compare has all


def eval_compare(request: StudioRequest, slug: str) -> HttpResponse:
    project, role = project_for(request.user, slug)
    raw_a, raw_b = request.GET.get("a", "").strip(), request.GET.get("b", "").strip()
    id_a, id_b = whole_number(raw_a), whole_number(raw_b)
    if id_a is None or id_b is None:
        return render(
            request,
            "evals/results_compare.html",
            {
                "project": project,
                "role": role,
                "error": f"Choose two evals to compare: /p/{slug}/evals/compare?a=EVAL_ID&b=EVAL_ID "
                "(a is the before, b the after; the summary page of an eval has a picker).",
                "a_id": raw_a,
                "b_id": raw_b,
            },
            status=400,
        )
    a, role = open_eval(request, slug, id_a)
    b, _ = eval_for(request.user, id_b)
    context: dict[str, Any] = {"a": a, "b": b, "role": role, "project": a.project, "a_id": raw_a, "b_id": raw_b}
    try:
        cmp = compare(a, b, common_only=request.GET.get("common") == "1")
    except NotComparable as exc:
        context["error"] = str(exc)
        return render(request, "evals/results_compare.html", context, status=400)
    show = shown_compare(cmp)
    changed_only = request.GET.get("changed") == "1"
    every = compare_cases(a, b, pack_of(a), pack_of(b), changed_only=changed_only)
    pairs = every[:MAX_PAIRS]  # the rest through the API; only the rows shown get their texts and links
    for row in pairs:
        row.update(
            expected_text=compact(row["expected"]),
            expected_a_text=compact(row["expected_a"]),
            expected_b_text=compact(row["expected_b"]),
            input_text=compact(row["input"]),
            a_url=reverse("evals-case-trace", args=[slug, a.pk, row["case_id"], row["repeat"]]) if row["a"] else "",
            b_url=reverse("evals-case-trace", args=[slug, b.pk, row["case_id"], row["repeat"]]) if row["b"] else "",
        )
        for side in ("a", "b"):
            if row[side] is not None:
                row[side] = {**row[side], "output_text": compact(row[side]["output"])}
    context.update(
        pairs=pairs,
        more_pairs=max(0, len(every) - MAX_PAIRS),
        changed_only=changed_only,
        cancelled=[e for e in (a, b) if e.status == Eval.Status.CANCELLED],
        cmp=cmp,
        show=show,
    )
    return render(request, "evals/results_compare.html", context)


def shown_compare(cmp: dict[str, Any]) -> dict[str, str]:
    """Add the display text to `compare()`'s answer (each metric's values and change, each
    fixed and broken case's rates) and return the intervals and p-value as text: what the
    compare page and a proposal's checks show alike."""
    for m in cmp["metrics"]:
        m.update(
            a_text=metric_text(m["metric"], m["a"]),
            b_text=metric_text(m["metric"], m["b"]),
            delta_text=delta_text(m["metric"], m["delta"], m["relative"]),
        )
    for c in cmp["fixed"] + cmp["broken"]:
        c.update(before_text=pct(c["before"]), after_text=pct(c["after"]))
    p = cmp["p_value"]
    return {
        "ci_a": "–".join(pct(x) for x in cmp["ci_a"]),
        "ci_b": "–".join(pct(x) for x in cmp["ci_b"]),
        "p_value": f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}",
    }


# -- history ------------------------------------------------------------------------------


def eval_history(request: StudioRequest, slug: str) -> HttpResponse:
    project, role = project_for(request.user, slug)
    try:
        log = PackRepo(project.repo_path).log(limit=1000)
    except StorageError:
        log = []
    order = [v.sha for v in reversed(log)]
    subjects = {v.sha: v.message.splitlines()[0] if v.message else "" for v in log}
    hist = history(project, order)
    labels = [v[:7] for v in hist["versions"]]

    def points(metric: str, fmt: Any) -> list[tuple[str, list[charts.Point]]]:
        out = []
        for s in hist["series"]:
            pts = []
            for row in s["points"]:
                value = row[metric]
                low, high = row["ci95"] if metric == "pass_rate" else (None, None)
                pts.append(
                    charts.Point(
                        row["x"],
                        value,
                        f"{row['version'][:SHORT]} · eval {row['eval'].pk} · {fmt(value)} over {row['runs']} runs",
                        reverse("evals-summary", args=[slug, row["eval"].pk]),
                        low,
                        high,
                    )
                )
            out.append((s["model"], pts))
        return out

    pass_plot = charts.line_plot(
        labels,
        points("pass_rate", pct),
        label=f"Pass rate of {slug} per version",
        y_label="pass rate (95% interval)",
        fmt=lambda v: f"{100 * v:.0f}%",
        y_max=1.0,
    )
    cost_plot = charts.line_plot(
        labels,
        points("cost_per_case", usd),
        label=f"Cost per case of {slug} per version",
        y_label="cost per case (USD)",
        fmt=usd,
    )
    rows = sorted(hist["evals"], key=lambda r: (-r["x"], -r["eval"].created_at.timestamp()))
    for row in rows:
        row.update(
            subject=subjects.get(row["version"], ""),
            pass_text=pct(row["pass_rate"]),
            cost_text=usd(row["cost_per_case"]),
        )
    context = {
        "project": project,
        "role": role,
        "hist": hist,
        "rows": rows,
        "pass_plot": pass_plot,
        "cost_plot": cost_plot,
    }
    return render(request, "evals/results_history.html", context)
