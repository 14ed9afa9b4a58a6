"""Try-it pages: start a run of one pack version on one input, and watch its trace
arrive node by node. Authors start runs; every member can watch them; strangers get
404. Function views that return early; htmx gets fragments, pollers stop with 286."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseStopPolling

from studio.accounts.access import project_for, run_for
from studio.http import StudioRequest
from studio.projects.storage import PackRepo
from studio.redaction import visible_trace
from studio.runs import start
from studio.runs.forms import TryRunForm
from studio.runs.models import TryRun
from studio.runs.steps import for_page, pretty, totals, trace_steps
from studio.runs.tasks import execute_try_run
from studio.runs.windows import STEPS_PER_ANSWER, trace_window

# A run still queued after this long gets a hint on its page (is a worker running?).
QUEUE_PATIENCE = timedelta(seconds=30)


@require_http_methods(["GET", "POST"])
def try_new(request: StudioRequest, slug: str) -> HttpResponse:
    project, _ = project_for(request.user, slug, edit=True)
    versions = PackRepo(project.repo_path).log(limit=50)
    problem = refused = None
    prepared = None
    try:
        prepared = start.prepare(project, None, None)
        problem = prepared.problem
    except start.TryRefused as exc:
        refused = str(exc)
    default_model = prepared.pack.model if prepared else None
    form = TryRunForm(request.POST or None, versions=versions, default_model=default_model)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = start.new_try_run(
                project, user=request.user, version=data["version"], endpoint=data["endpoint"], input=data["input"]
            )
        except start.TryRefused as exc:
            form.add_error(None, str(exc))
        else:
            execute_try_run.delay_on_commit(run.pk)
            return redirect("runs-detail", slug=project.slug, run_id=run.pk)
    cases = list(prepared.pack.cases) if prepared else []
    chosen = next((c for c in cases if c.id == request.GET.get("case")), None)
    if request.method == "GET" and prepared is not None:
        example = dict(chosen.input) if chosen else start.first_case_input(prepared.pack)
        if example is None:
            example = dict.fromkeys(prepared.pack.inputs or (), "")
        form.initial["input"] = pretty(example)
    context = {
        "project": project,
        "form": form,
        "problem": problem,
        "refused": refused,
        "case_keyed": prepared.case_keyed if prepared else False,
        "model": prepared.pack.model if prepared else "",
        "cases": [(c.id, pretty(dict(c.input))) for c in cases],
        "chosen": chosen.id if chosen else (cases[0].id if cases else ""),
        "recent": TryRun.objects.filter(project=project).select_related("endpoint")[:10],
    }
    return render(request, "runs/new.html", context, status=400 if request.method == "POST" else 200)


def _steps_from(request: StudioRequest) -> int:
    """The page's `?steps_from=` (0 when absent or not a whole number >= 0)."""
    raw = request.GET.get("steps_from", "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else 0


def run_detail(request: StudioRequest, slug: str, run_id: int) -> HttpResponse:
    run, role = run_for(request.user, run_id, slug=slug, trace=False)
    project = run.project
    # One window of steps (studio.runs.windows), as the API answers it: the page polls
    # twice a second, and a looping run has 10,000 steps.
    shown = trace_window(run, _steps_from(request))
    steps = for_page(trace_steps(visible_trace(shown.trace, role)))
    first, count, total = shown.steps_from, len(shown.trace.get("steps") or []), shown.steps_total
    context = {
        "window": {
            "cut": total > count,
            "empty": count == 0 and first > 0,  # asked past the last step
            "first": first + 1,
            "last": first + count,
            "total": total,
            "from": first,
            "earlier": max(0, min(first, total) - STEPS_PER_ANSWER) if first > 0 else None,
            "later": shown.next_steps_from,
        },
        "run": run,
        "project": project,
        "role": role,
        "author": role.can_edit,
        "steps": steps,
        "totals": totals(steps),
        "input_json": pretty(run.input),
        "output_json": pretty(run.output) if run.output is not None else "",
        # A run held back by the caps on runs going at once says so in its error field.
        "slow_queue": run.status == TryRun.Status.QUEUED
        and run.held_at is None
        and timezone.now() - run.created_at > QUEUE_PATIENCE,
    }
    if not request.htmx:
        return render(request, "runs/detail.html", context)
    page = render(request, "runs/detail.html#run-trace", context)
    if run.is_final:
        return HttpResponseStopPolling(page.content)
    return page


# -- the URLs before /p/<slug>/ (docs/studio.md); a stranger still gets 404 --------------


def try_new_moved(request: StudioRequest) -> HttpResponsePermanentRedirect:
    project, _ = project_for(request.user, request.GET.get("project", ""))
    response = HttpResponsePermanentRedirect(reverse("runs-new", args=[project.slug]))
    if request.method == "POST":
        response.status_code = 308  # a form posted from an old page arrives as a POST
    return response


def run_moved(request: StudioRequest, run_id: int) -> HttpResponsePermanentRedirect:
    run, _ = run_for(request.user, run_id)
    return HttpResponsePermanentRedirect(reverse("runs-detail", args=[run.project.slug, run.pk]))
