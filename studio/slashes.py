"""One trailing slash too many: `POST /api/deployments/` (as a client may write it) and
`/review/1/` (as a user may type it) are the same place as `/api/deployments` and
`/review/1`, which is where the studio's routes are. Django's APPEND_SLASH adds a
missing slash; nothing took an extra one away, so both answered 404.

A request whose path ends in "/" and does not resolve, while the path without it does:
under /api/ it is served as that path (API clients do not follow redirects on a POST);
a page is redirected there with 301 for GET and HEAD (one address per page), and
served as that path for other methods (a form's POST keeps its body)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve


class TrailingSlashMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if len(path) > 1 and path.endswith("/") and not _resolves(path) and _resolves(path[:-1]):
            if not path.startswith("/api/") and request.method in ("GET", "HEAD"):
                query = request.META.get("QUERY_STRING", "")
                target = request.path[:-1] + (f"?{query}" if query else "")
                return HttpResponsePermanentRedirect(target)
            request.path_info = path[:-1]
            request.path = request.path[:-1]
        return self.get_response(request)


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True
