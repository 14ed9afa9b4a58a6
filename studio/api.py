"""The one NinjaAPI: every app's Router is gathered here. OpenAPI at /api/docs.

Every operation is authenticated (a bearer token, or the session with CSRF); errors
use the {"detail": ...} shape."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI

from studio.accounts.auth import API_AUTH

api = NinjaAPI(
    title="Packforge studio", version="1", urls_namespace="api", auth=API_AUTH, docs_decorator=login_required
)


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(request, {"detail": "Not found"}, status=404)


@api.exception_handler(PermissionDenied)
def forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc) or "Forbidden"}, status=403)


@api.exception_handler(ValidationError)
def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return api.create_response(request, {"detail": "; ".join(exc.messages)}, status=400)


api.add_router("/projects", "studio.projects.api.router")
api.add_router("/endpoints", "studio.endpoints.api.router")
api.add_router("/runs", "studio.runs.api.router")
api.add_router("/tokens", "studio.accounts.api.router")
api.add_router("/evals", "studio.evals.api.router")
