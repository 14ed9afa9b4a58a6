"""An eval's result pages: summary, per-node blame, branch coverage, tiers, cost per
case, one case's trace, two evals compared, a project's history, the baseline.

Function views that return early. Every page is login-required (the middleware), gives
a stranger 404 and lets every member read. Rejected generations (the text of an attempt
that failed verification) are shown to authors only: others see that an attempt was
rejected and why. An htmx request gets the fragment named after the DOM id it replaces:
`results-page` (everything below the site header) or, on the cost page, `cost-table`."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from runtime import DEFAULT_TOLERANCES, METRIC_DIRECTIONS, NODE_KINDS, Pack
from studio.accounts.access import eval_for, project_for
from studio.accounts.models import Role
from studio.evals import charts, results
from studio.evals.models import Eval, EvalCase
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.projects.execute import PACK_PREFIX, validate_files
from studio.projects.graph_svg import draw
from studio.projects.storage import PackRepo, StorageError
from studio.redaction import visible_trace

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


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


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
    if name in RATES:
        return pct(v)
    return usd(v) if name == "cost_per_case" else f"{v:.2f}"


def delta_text(name: str, delta: float, relative: float | None) -> str:
    if name in RATES:
        return f"{100 * delta:+.1f} pp"
    rel = f" ({100 * relative:+.1f}%)" if relative is not None else ""
    if name == "cost_per_case":
        return ("+" if delta >= 0 else "−") + usd(abs(delta)) + rel
    return f"{delta:+.2f}{rel}"


def summary_context(ev: Eval) -> dict[str, Any]:
    """`summary` and its `show` strings: what the `eval-summary` fragment of
    evals/results_summary.html needs (the live eval page may include it)."""
    summary = results.summarize(ev)
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


# -- summary ------------------------------------------------------------------------------


def baseline_panel(ev: Eval) -> dict[str, Any] | None:
    base = results.baseline_for(ev)
    if base is None:
        return None
    rows = results.gate(ev, base)
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
        "same_cases": base.tags == ev.tags and base.total == ev.total,
    }


def eval_summary(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    shown = summary_context(ev)
    tier_rows = shown["summary"]["tiers"]["rows"]
    colours = {"auto": "#067647", "escalated": "#dc6803", "failed": "#b42318"}
    tier_chart = charts.hbars(
        [
            charts.Bar(
                r["tier"],
                r["count"],
                f"{r['count']} ({pct(r['share'])})",
                colours.get(r["tier"], "#475467"),
                reverse("evals-tiers", args=[ev.project.slug, ev.pk]),
            )
            for r in tier_rows
        ],
        label="Runs per confidence tier",
    )
    others = list(Eval.objects.filter(project=ev.project).exclude(pk=ev.pk).order_by("-created_at")[:50])
    per_case = results.case_pass_rates(ev) if ev.repeats > 1 else []
    context = context_for(
        ev, role, "summary", tier_chart=tier_chart, others=others, gate=baseline_panel(ev), per_case=per_case, **shown
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


# -- per-node blame -----------------------------------------------------------------------

MAX_REASONS = 5


def _terminal(kind: str) -> bool:
    """An end-like node (the runtime's kind flag): it decides nothing, so it gets no bar of its own."""
    found = NODE_KINDS.get(kind)
    return found is not None and found.terminal


def eval_blame(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    pack = pack_of(ev)
    blame = results.node_blame(ev, pack)
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
    cov = results.coverage(ev, pack)
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


# -- tiers --------------------------------------------------------------------------------


def eval_tiers(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    split = results.tiers(ev)
    for r in split["rows"]:
        r.update(
            share_text=pct(r["share"]),
            accuracy_text=pct(r["accuracy"]),
            cost_per_case_text=usd(r["cost_per_case"]),
            cost_total_text=usd(r["cost_total"]),
        )
    colours = {"auto": "#067647", "escalated": "#dc6803", "failed": "#b42318"}
    chart = charts.hbars(
        [
            charts.Bar(r["tier"], r["count"], f"{r['count']} ({pct(r['share'])})", colours.get(r["tier"], "#475467"))
            for r in split["rows"]
        ],
        label="Runs per confidence tier",
    )
    accuracy = charts.hbars(
        [
            charts.Bar(r["tier"], r["accuracy"] or 0, pct(r["accuracy"]), colours.get(r["tier"], "#475467"))
            for r in split["rows"]
        ],
        label="Accuracy inside each tier",
        max_value=1.0,
    )
    return page(
        request, "evals/results_tiers.html", context_for(ev, role, "tiers", split=split, chart=chart, accuracy=accuracy)
    )


# -- cost per case ------------------------------------------------------------------------

COLUMNS = [
    ("case", "Case"),
    ("status", "Status"),
    ("cost", "Cost"),
    ("tokens", "Tokens"),
    ("latency", "Latency"),
    ("generations", "Generations"),
]


def eval_cost(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    table = results.cost_table(
        ev,
        sort=request.GET.get("sort", "cost"),
        direction=request.GET.get("dir", "desc"),
        page=whole_number(request.GET.get("page"), minimum=1, maximum=1_000_000) or 1,
    )
    base = reverse("evals-cost", args=[ev.project.slug, ev.pk])
    rows = [
        {
            **r,
            "url": reverse("evals-case-trace", args=[ev.project.slug, ev.pk, r["case_id"], r["repeat"]]),
            "cost_text": usd(r["cost_usd"]),
            "latency_text": dur(r["latency_s"]),
        }
        for r in table["rows"]
    ]
    headers = []
    for key, title in COLUMNS:
        flip = "asc" if table["sort"] == key and table["dir"] == "desc" else "desc"
        headers.append(
            {
                "key": key,
                "title": title,
                "url": f"{base}?{urlencode({'sort': key, 'dir': flip})}",
                "active": table["sort"] == key,
                "dir": table["dir"],
            }
        )

    def at(n: int) -> str:
        return f"{base}?{urlencode({'sort': table['sort'], 'dir': table['dir'], 'page': n})}"

    pager = {
        "prev": at(table["page"] - 1) if table["page"] > 1 else None,
        "next": at(table["page"] + 1) if table["page"] < table["pages"] else None,
    }
    context = context_for(ev, role, "cost", table=table, rows=rows, headers=headers, pager=pager)
    if not (request.htmx and request.htmx.target == "cost-table"):
        spend = results.cost_summary(ev)
        values = spend.pop("values")
        show = {
            "cost_mean": usd(spend["cost"]["mean"]),
            "cost_p50": usd(spend["cost"]["p50"]),
            "cost_p95": usd(spend["cost"]["p95"]),
            "cost_total": usd(spend["cost_total"]),
            "latency_p50": dur(spend["latency"]["p50"]),
            "latency_p95": dur(spend["latency"]["p95"]),
        }
        context.update(
            summary=spend,
            show=show,
            histogram=charts.histogram(
                values,
                label="Cost per case run (USD)",
                fmt=usd,
                marks=[("p50", spend["cost"]["p50"]), ("p95", spend["cost"]["p95"])] if values else [],
            ),
        )
    return page(request, "evals/results_cost.html", context, fragments=("cost-table",))


# -- one case's trace ---------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def trace_steps(trace: dict[str, Any], pack: Pack | None) -> list[dict[str, Any]]:
    """The trace (as studio.redaction.visible_trace shows it), node by node: each step
    with its attempts, tool calls and commits."""
    attempts: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for a in trace.get("attempts") or []:
        attempts[(a.get("node"), a.get("step"))].append(dict(a))
    tools: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for t in trace.get("tool_calls") or []:
        tools[(t.get("node"), t.get("step"))].append(
            {**t, "args_json": _json(t.get("args")), "result_json": _json(t.get("result"))}
        )
    names = {e.index: results.edge_name(e) for e in pack.edges} if pack is not None else {}
    out = []
    for s in trace.get("steps") or []:
        key = (s.get("node"), s.get("step"))
        mine = attempts.pop(key, [])
        edge = s.get("edge") or None
        out.append(
            {
                **s,
                "attempts": mine,
                "tool_calls": tools.pop(key, []),
                "writes_list": [(k, _json(v)) for k, v in (s.get("writes") or {}).items()],
                "edge_name": (names.get(edge["index"]) or f"→ {edge.get('target')} ({edge.get('kind')})")
                if edge
                else "",
                "tokens": sum(
                    (a.get("prompt_tokens") or 0) + (a.get("completion_tokens") or 0) + (a.get("reasoning_tokens") or 0)
                    for a in mine
                ),
                "latency_s": sum(a.get("latency_s") or 0 for a in mine)
                + sum(t.get("latency_s") or 0 for t in tools.get(key, [])),
                "cost_usd": sum(a.get("cost_usd") or 0 for a in mine),
            }
        )
    for (node, step), rest in sorted(attempts.items(), key=lambda kv: (kv[0][1] or 0, str(kv[0][0]))):
        # attempts of a step that never committed (the run stopped inside it)
        out.append(
            {
                "node": node,
                "step": step,
                "kind": "",
                "status": "stopped",
                "attempts": rest,
                "tool_calls": tools.pop((node, step), []),
                "writes_list": [],
                "edge_name": "",
                "tokens": sum(
                    (a.get("prompt_tokens") or 0) + (a.get("completion_tokens") or 0) + (a.get("reasoning_tokens") or 0)
                    for a in rest
                ),
                "latency_s": sum(a.get("latency_s") or 0 for a in rest),
                "cost_usd": sum(a.get("cost_usd") or 0 for a in rest),
            }
        )
    out.sort(key=lambda s: s.get("step") or 0)
    return out


def eval_case(request: StudioRequest, slug: str, eval_id: int, case_id: str, repeat: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    case = EvalCase.objects.filter(eval=ev, case_id=case_id, repeat=repeat).first()
    if case is None:
        raise Http404("No such case run in this eval")
    trace = case.trace if isinstance(case.trace, dict) else {}
    steps = trace_steps(visible_trace(trace, role), pack_of(ev))
    hidden = sum(1 for s in steps for a in s["attempts"] if a.get("hidden"))
    for s in steps:
        s.update(latency_text=dur(s["latency_s"]), cost_text=usd(s["cost_usd"]))
        for a in s["attempts"]:
            a.update(latency_text=dur(a.get("latency_s")), cost_text=usd(a.get("cost_usd")))
        for t in s["tool_calls"]:
            t["latency_text"] = dur(t.get("latency_s"))
    repeats = list(EvalCase.objects.filter(eval=ev, case_id=case_id).order_by("repeat").values_list("repeat", "status"))
    context = context_for(
        ev,
        role,
        "case",
        case=case,
        steps=steps,
        hidden=hidden,
        repeats=repeats,
        trace_status=trace.get("status"),
        end_node=trace.get("end_node"),
        trace_error=trace.get("error"),
        has_trace=bool(trace),
        diffs=[
            {**d, "expected_json": _json(d.get("expected")), "actual_json": _json(d.get("actual"))}
            for d in case.diffs or []
            if isinstance(d, dict)
        ],
        tokens=case.prompt_tokens + case.completion_tokens + case.reasoning_tokens,
        show={"latency": dur(case.latency_s), "cost": usd(case.cost_usd)},
    )
    return page(request, "evals/results_case.html", context)


# -- compare ------------------------------------------------------------------------------


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
        cmp = results.compare(a, b)
    except results.NotComparable as exc:
        context["error"] = str(exc)
        return render(request, "evals/results_compare.html", context, status=400)
    for m in cmp["metrics"]:
        m.update(
            a_text=metric_text(m["metric"], m["a"]),
            b_text=metric_text(m["metric"], m["b"]),
            delta_text=delta_text(m["metric"], m["delta"], m["relative"]),
        )
    for c in cmp["fixed"] + cmp["broken"]:
        c.update(before_text=pct(c["before"]), after_text=pct(c["after"]))
    p = cmp["p_value"]
    context.update(
        cmp=cmp,
        show={
            "ci_a": "–".join(pct(x) for x in cmp["ci_a"]),
            "ci_b": "–".join(pct(x) for x in cmp["ci_b"]),
            "p_value": f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}",
        },
    )
    return render(request, "evals/results_compare.html", context)


# -- history ------------------------------------------------------------------------------


def eval_history(request: StudioRequest, slug: str) -> HttpResponse:
    project, role = project_for(request.user, slug)
    try:
        log = PackRepo(project.repo_path).log(limit=1000)
    except StorageError:
        log = []
    order = [v.sha for v in reversed(log)]
    subjects = {v.sha: v.message.splitlines()[0] if v.message else "" for v in log}
    hist = results.history(project, order)
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
