"""A served run's page: what it was asked, where it is or how it ended, every step of its
trace (the try-it run page's steps table), and links to its deployment and its review
item. Any member of the project reads it; a stranger gets 404 (studio.deployments.access).
A run still going polls its own trace fragment, like a try-it run."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django_htmx.http import HttpResponseStopPolling

from studio.deployments import served_store
from studio.deployments.access import deployment_for, served_run_for
from studio.deployments.models import ServedRun
from studio.http import StudioRequest
from studio.redaction import visible_trace
from studio.review.models import ReviewItem
from studio.runs.steps import for_page, pretty, totals, trace_steps

__all__ = ["served_run_page"]


def served_run_page(request: StudioRequest, slug: str, name: str, run_id: str) -> HttpResponse:
    deployment, role = deployment_for(request.user, name)
    if deployment.project.slug != slug:
        raise Http404("No such deployment")
    run = served_run_for(deployment, run_id)
    # A running run's trace is written when it settles; until then its steps are the journal's.
    raw = served_store.journal_trace(run) if run.status == ServedRun.Status.RUNNING else None
    steps = for_page(trace_steps(visible_trace(raw or run.trace or {}, role)))
    context = {
        "project": deployment.project,
        "deployment": deployment,
        "run": run,
        "role": role,
        "steps": steps,
        "totals": totals(steps),
        "input_json": pretty(run.input),
        "output_json": pretty(run.output) if run.output is not None else "",
        "state_json": pretty(run.state) if run.state else "",
        "review_items": ReviewItem.objects.filter(run=run).order_by("pk").only("pk", "status", "reason"),
        "polling": not run.is_final and run.status != ServedRun.Status.WAITING,
    }
    if not request.htmx:
        return render(request, "deployments/run.html", context)
    page = render(request, "deployments/run.html#served-trace", context)
    return page if context["polling"] else HttpResponseStopPolling(page.content)
