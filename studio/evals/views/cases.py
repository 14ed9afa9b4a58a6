"""The per-case table (filtered, paged, exported), the matrix of several evals over the same
cases, adding an input and its corrected output to the evalset (from a case's drill-down or
a try-it run), and the list of every eval across projects (every run: studio.runlist.query)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runtime import NODE_KINDS
from studio.accounts.access import eval_for, project_for, run_for, visible_projects
from studio.evals.evalset_case import CaseRefused, add_case
from studio.evals.lists import visible_evals
from studio.evals.models import Eval, EvalCase
from studio.evals.results.cases import (
    STATUSES,
    TIER_NAMES,
    BadFilter,
    CaseFilter,
    case_page,
    export_response,
    matrix,
)
from studio.evals.views.common import compact, context_for, dur, open_eval, pack_of, page, pct, usd
from studio.http import StudioRequest
from studio.numbers import whole_number

__all__ = ["all_evals", "eval_add_case", "eval_cases", "eval_export", "eval_matrix"]

MAX_MATRIX = 8


def _ends_runs(kind: str) -> bool:
    found = NODE_KINDS.get(kind)
    return found is not None and (found.terminal or found.waits)


# -- the per-case table ---------------------------------------------------------------------------


def eval_cases(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    try:
        f = CaseFilter.from_query(request.GET)
    except BadFilter as exc:
        f, problem = CaseFilter(), str(exc)
    else:
        problem = ""
    pack = pack_of(ev)
    got = case_page(ev, f, pack, page=whole_number(request.GET.get("page"), minimum=1, maximum=1_000_000) or 1)
    for r in got["rows"]:
        r.update(
            url=reverse("evals-case-trace", args=[ev.project.slug, ev.pk, r["case_id"], r["repeat"]]),
            input_text=compact(r["input"]),
            expected_text=compact(r["expected"]),
            output_text=compact(r["output"]),
            cost_text=usd(r["cost_usd"]),
            latency_text=dur(r["latency_s"]),
        )
    base = reverse("evals-cases", args=[ev.project.slug, ev.pk])
    params = f.params()

    def at(n: int) -> str:
        return f"{base}?{urlencode({**params, 'page': n})}"

    pager = {
        "prev": at(got["page"] - 1) if got["page"] > 1 else None,
        "next": at(got["page"] + 1) if got["page"] < got["pages"] else None,
    }
    export = reverse("evals-export", args=[ev.project.slug, ev.pk])
    context = context_for(
        ev,
        role,
        "cases",
        table=got,
        f=f,
        problem=problem,
        pager=pager,
        statuses=STATUSES,
        tier_names=TIER_NAMES,
        tags=sorted({t for c in (pack.cases if pack is not None else []) for t in c.tags}),
        nodes=list(pack.nodes) if pack is not None else [],
        ends=[n for n, node in (pack.nodes.items() if pack is not None else []) if _ends_runs(node.kind)],
        export_csv=f"{export}?{urlencode({**params, 'format': 'csv'})}",
        export_jsonl=f"{export}?{urlencode({**params, 'format': 'jsonl'})}",
    )
    return page(request, "evals/results_cases.html", context, status=400 if problem else 200, fragments=("case-table",))


def eval_export(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse | StreamingHttpResponse:
    ev, _ = open_eval(request, slug, eval_id)
    try:
        f = CaseFilter.from_query(request.GET)
    except BadFilter as exc:
        return HttpResponseBadRequest(str(exc))
    try:
        return export_response(ev, f, pack_of(ev), request.GET.get("format", "csv"))
    except BadFilter as exc:
        return HttpResponseBadRequest(str(exc))


# -- several evals over the same cases --------------------------------------------------------------


def eval_matrix(request: StudioRequest, slug: str) -> HttpResponse:
    project, role = project_for(request.user, slug)
    raw = request.GET.getlist("evals") or [request.GET.get("evals", "")]
    ids: list[int] = []
    for part in ",".join(raw).replace(" ", ",").split(","):
        n = whole_number(part)
        if n is not None and n not in ids:
            ids.append(n)
    recent = list(Eval.objects.filter(project=project).order_by("-created_at")[:30])
    context: dict[str, Any] = {"project": project, "role": role, "recent": recent, "chosen": ids}
    if not 2 <= len(ids) <= MAX_MATRIX:
        context["error"] = f"Choose 2 to {MAX_MATRIX} evals of {project.slug} to lay side by side."
        return render(request, "evals/results_matrix.html", context, status=400 if len(ids) > MAX_MATRIX else 200)
    evals = [eval_for(request.user, i, slug=slug)[0] for i in ids]  # another project's eval: 404
    got = matrix(evals, [pack_of(ev) for ev in evals])
    for c in got["columns"]:
        c["pass_text"] = pct(c["pass_rate"])
    for r in got["rows"]:
        r["expected_text"] = compact(r["expected"])
        r["input_text"] = compact(r["input"])
        r["cells"] = [
            {
                **cell,
                "output_text": compact(cell["output"]),
                "expected_text": compact(expected) if r["evalset_changed"] else "",
                "url": reverse("evals-case-trace", args=[slug, ev.pk, r["case_id"], 0]),
            }
            if cell is not None
            else None
            for cell, ev, expected in zip(r["cells"], evals, r["expected_by_eval"], strict=True)
        ]
    context.update(matrix=got, evals=evals)
    return render(request, "evals/results_matrix.html", context)


# -- add to evalset ------------------------------------------------------------------------------


@require_POST
def eval_add_case(request: StudioRequest, slug: str) -> HttpResponse:
    """From a case's drill-down (eval, case, repeat) or a try-it run (run): the input and
    the corrected output (the form's JSON) as a new evalset case, one commit."""
    project, role = project_for(request.user, slug)
    if not role.can_edit:
        raise PermissionDenied(f"your role on {project.slug} is {role.value}; only authors change the evalset")
    back = reverse("projects-evalset", args=[slug])
    note, default_id = "", "case"
    run_id, eval_id = whole_number(request.POST.get("run")), whole_number(request.POST.get("eval"))
    if run_id is not None:
        run, _ = run_for(request.user, run_id, slug=slug)
        back, case_input = reverse("runs-detail", args=[slug, run.pk]), run.input
        note, default_id = f"from try-it run {run.pk} ({run.model_spec or 'the pack model'})", f"try-{run.pk}"
    elif eval_id is not None:
        ev, _ = eval_for(request.user, eval_id, slug=slug)
        case_id = request.POST.get("case_id", "")
        repeat = whole_number(request.POST.get("repeat")) or 0
        row = EvalCase.objects.filter(eval=ev, case_id=case_id, repeat=repeat).first()
        if row is None:
            return HttpResponseBadRequest("no such case run in this eval")
        back = reverse("evals-case-trace", args=[slug, ev.pk, case_id, repeat])
        pack = pack_of(ev)
        case = next((c for c in (pack.cases if pack is not None else []) if c.id == case_id), None)
        case_input = case.input if case is not None else None
        note, default_id = f"from eval {ev.pk}, case {case_id} run {repeat}", f"{case_id}-fix"
    else:
        return HttpResponseBadRequest("say where the case comes from: a try-it run or an eval's case")
    try:
        expected = json.loads(request.POST.get("expected") or "{}")
        saved = add_case(
            project,
            request.user,
            input=case_input,
            expected=expected,
            case_id=request.POST.get("new_id", ""),
            default_id=default_id,
            note=note,
        )
    except json.JSONDecodeError as exc:
        messages.error(request, f"The corrected output is not JSON: {exc.msg} (line {exc.lineno}).")
        return redirect(back)
    except CaseRefused as exc:
        messages.error(request, f"Not added: {exc}")
        return redirect(back)
    messages.success(request, f"Added case {saved.case_id} to the evalset of {slug} (commit {saved.sha[:10]}).")
    return redirect(reverse("projects-evalset", args=[slug]))


# -- across projects -------------------------------------------------------------------------------


def _across_projects(request: StudioRequest, rows: QuerySet[Any], **filters: str) -> dict[str, Any]:
    """The page of `rows` (the evals of every project the user sees) that the
    request asks for, narrowed to ?project= and `filters` (already checked), as the
    template's context; `query` keeps the filters on the page links."""
    chosen = request.GET.get("project", "").strip()
    if chosen:
        rows = rows.filter(project__slug=chosen)
    for field, value in filters.items():
        if value:
            rows = rows.filter(**{field: value})
    pages = Paginator(rows, 50)
    shown = pages.get_page(whole_number(request.GET.get("page"), minimum=1, maximum=1_000_000) or 1)
    kept = {"project": chosen, **filters}
    return {
        "page_obj": shown,
        "projects": visible_projects(request.user),
        "chosen": chosen,
        "query": urlencode({k: v for k, v in kept.items() if v}),
    }


def all_evals(request: StudioRequest) -> HttpResponse:
    rows = visible_evals(request.user).select_related("project", "endpoint", "created_by")
    status = request.GET.get("status", "").strip()
    status = status if status in Eval.Status.values else ""
    context = _across_projects(request, rows, status=status)
    context.update(status=status, statuses=Eval.Status.values)
    return render(request, "evals/all_evals.html", context)
