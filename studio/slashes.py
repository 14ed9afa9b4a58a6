"""One slash rule for pages and the API: a path that does not resolve, while the same
path with its trailing slash taken away (`POST /api/deployments/`, `/review/1/`) or
added (`POST /tokens`) does, is that place.

- A page asked with GET or HEAD is redirected there with 301 (one address per page;
  Django's APPEND_SLASH does it for a missing slash, this middleware for an extra one).
- Anything else is served as that path, without a redirect: an API call (API clients do
  not follow redirects on a POST, and one that does resends it as a GET) and a page's
  POST (a form keeps its body).

docs/api.md states the rule; it and the other docs write API paths without the slash."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve


class TrailingSlashMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        api = path.startswith("/api/")
        page_get = not api and request.method in ("GET", "HEAD")
        # Only what may be misspelt is resolved twice: a path with a trailing slash, and a
        # page's POST without one (the API's routes have none, so its calls cost nothing here).
        if len(path) > 1 and (path.endswith("/") or not (api or page_get)):
            other = path[:-1] if path.endswith("/") else path + "/"
            if not _resolves(path) and _resolves(other):
                if page_get:  # an extra slash (a missing one is CommonMiddleware's APPEND_SLASH)
                    query = request.META.get("QUERY_STRING", "")
                    return HttpResponsePermanentRedirect(request.path[:-1] + (f"?{query}" if query else ""))
                request.path = request.path[: len(request.path) - len(path)] + other
                request.path_info = other
        return self.get_response(request)


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True
