"""The API's one error shape and its one handler map.

Every error answers `{"detail": ...}`: a sentence for `HttpError` and Django's exceptions,
ninja's list of problems for a 422 (a body or parameter of the wrong shape). Each router
declares the errors its operations may give with `**ERRORS`, plus `**CONFLICT` where an
operation can answer 409 and `**INVALID` where it takes a body or a typed parameter (so
ninja can answer 422), so the OpenAPI document lists every status an operation can give
(tests/studio/api/test_openapi_fuzz.py holds them to it). `install` maps Django's
exceptions (404, 403, a model's ValidationError, a database's DataError as 400) onto the same shape for the one NinjaAPI;
`page_not_found` does it for a URL under /api/ that no route matches."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.datastructures import MultiValueDict
from django.views import defaults
from ninja import NinjaAPI, Schema
from ninja.errors import HttpError
from ninja.parser import Parser


class ErrorOut(Schema):
    detail: str


class InvalidItemOut(Schema):
    type: str
    loc: list[str | int]
    msg: str


class InvalidOut(Schema):
    """ninja's answer to a body or parameter of the wrong shape (422)."""

    detail: list[InvalidItemOut]


ERRORS: dict[int, type[Schema]] = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}
CONFLICT: dict[int, type[Schema]] = {409: ErrorOut}
INVALID: dict[int, type[Schema]] = {422: InvalidOut}


NUL_REFUSED = "text in a request may not hold a NUL character (\\u0000)"


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


class StudioParser(Parser):
    """ninja's JSON parser, refusing NUL characters at the edge: Postgres stores none (in
    text or in JSON) and SQLite does, so the same request would be a 500 on one and
    stored on the other. A body is answered 400 ("Cannot parse request body"), a query
    string 400 with NUL_REFUSED."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        data = super().parse_body(request)
        if _holds_nul(data):
            raise ValueError(NUL_REFUSED)
        return data

    def parse_querydict(
        self, data: MultiValueDict[str, Any], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        parsed = super().parse_querydict(data, list_fields, request)
        if _holds_nul(parsed):
            raise HttpError(400, NUL_REFUSED)
        return parsed


def install(api: NinjaAPI) -> None:
    """Answer Django's own exceptions in the `{"detail": ...}` shape."""

    def not_found(request: HttpRequest, exc: object) -> HttpResponse:
        return api.create_response(request, {"detail": "Not found"}, status=404)

    def forbidden(request: HttpRequest, exc: object) -> HttpResponse:
        return api.create_response(request, {"detail": str(exc) or "Forbidden"}, status=403)

    def invalid(request: HttpRequest, exc: object) -> HttpResponse:
        messages = exc.messages if isinstance(exc, ValidationError) else [str(exc)]
        return api.create_response(request, {"detail": "; ".join(messages)}, status=400)

    def unstorable(request: HttpRequest, exc: object) -> HttpResponse:
        # Postgres refuses some text SQLite keeps (a NUL character in a string or in JSON):
        # the request is at fault, not the server.
        detail = "the request holds text the database cannot store (a NUL character, \\u0000?)"
        return api.create_response(request, {"detail": detail}, status=400)

    api.add_exception_handler(Http404, not_found)
    api.add_exception_handler(DataError, unstorable)
    api.add_exception_handler(PermissionDenied, forbidden)
    api.add_exception_handler(ValidationError, invalid)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 for a URL no route matches (`handler404`). Under /api/ it is the API's
    own shape, so a client that reads JSON reads this too (a `{path}` with a newline in it
    matches no API route)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found"}, status=404)
    return defaults.page_not_found(request, exception)
