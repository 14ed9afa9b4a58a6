"""Redirects from the eval URLs before every project page lived under /p/<slug>/
(docs/studio.md). Each answers only what the new URL would: a stranger still gets 404,
so a redirect never reveals which project an eval belongs to."""

from __future__ import annotations

from django.http import Http404, HttpResponsePermanentRedirect
from django.urls import reverse

from studio.accounts.access import eval_for, project_for
from studio.http import StudioRequest
from studio.numbers import whole_number


def _to(request: StudioRequest, url: str) -> HttpResponsePermanentRedirect:
    """301 for reads; 308 for a form post, so it arrives as a POST (with its CSRF token)."""
    query = request.META.get("QUERY_STRING", "")
    response = HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)
    if request.method not in ("GET", "HEAD"):
        response.status_code = 308
    return response


def eval_moved(request: StudioRequest, eval_id: int, rest: str = "") -> HttpResponsePermanentRedirect:
    ev, _ = eval_for(request.user, eval_id)
    return _to(request, reverse("evals-detail", args=[ev.project.slug, ev.pk]) + rest)


def eval_new_moved(request: StudioRequest) -> HttpResponsePermanentRedirect:
    project, _ = project_for(request.user, request.GET.get("project", ""))
    return HttpResponsePermanentRedirect(reverse("evals-new", args=[project.slug]))


def eval_compare_moved(request: StudioRequest) -> HttpResponsePermanentRedirect:
    eval_id = whole_number(request.GET.get("a"))
    if eval_id is None:
        raise Http404("No such eval")
    ev, _ = eval_for(request.user, eval_id)
    return _to(request, reverse("evals-compare", args=[ev.project.slug]))


def eval_history_moved(request: StudioRequest, slug: str) -> HttpResponsePermanentRedirect:
    project, _ = project_for(request.user, slug)
    return HttpResponsePermanentRedirect(reverse("evals-history", args=[project.slug]))
