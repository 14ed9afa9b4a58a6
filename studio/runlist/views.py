"""The /runs/ page: every run the user may see, filtered, newest first (studio.runlist.query)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import render

from studio.accounts.access import visible_projects
from studio.deployments.models import Deployment
from studio.http import StudioRequest
from studio.runlist.query import KINDS, STATUSES, BadQuery, RunQuery, query_from, run_page

__all__ = ["all_runs"]

FILTER_NAMES = ("project", "kind", "status", "deployment", "tier", "node", "since", "until", "q")


def all_runs(request: StudioRequest) -> HttpResponse:
    """Every run the user may see, try-it and served, filtered, newest first (studio.runlist.query)."""
    try:
        query, problem = query_from(request.GET), ""
    except BadQuery as exc:
        query, problem = RunQuery(), str(exc)
    got = run_page(request.user, query) if not problem else None
    kept = query.params() if not problem else {}
    projects = visible_projects(request.user)
    context = {
        "runs": got.runs if got else [],
        "query": query,
        # the form shows what was asked, a bad value included, so one fix is one edit
        "asked": {k: str(request.GET.get(k, ""))[:200] for k in FILTER_NAMES},
        "problem": problem,
        "projects": projects,
        "deployments": Deployment.objects.filter(project__in=projects).values_list("name", flat=True)[:500],
        "kinds": KINDS,
        "statuses": STATUSES,
        "older": urlencode({**kept, "cursor": got.next.encode()}) if got and got.next else "",
        "newest": bool(query.cursor),  # the first page, with the same filters: ?{{ kept }}
        "kept": urlencode(kept),
    }
    return render(request, "runs/all.html", context, status=400 if problem else 200)
