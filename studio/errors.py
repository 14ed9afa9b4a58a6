"""The studio's one refusal base, the API's one error shape and its one handler map.

`Refused` is what the studio raises when it will not do what a request asks. It carries
the HTTP status that says why (400 unless told), the sentence for the person, and an
optional short `code` (a name a test or a log can match on; it is not sent). `NotFound`,
`Forbidden` and `Conflict` set 404, 403 and 409; each app's refusals (CompileRefused,
EvalRefused, MemberConflict, ...) subclass one of them. An API operation lets a Refused
propagate and `install` answers it; a page view that does not catch one (a form shows
most refusals next to its fields) gets the same sentence in the studio's layout from
`RefusedMiddleware`. A Refused with a status of 500 or more is a fault of the server's:
both leave it to the server-error handling (logged, answered "Server error").

Every error answers `{"detail": ...}`: a sentence for a Refused, ninja's `HttpError` and
Django's exceptions, ninja's list of problems for a 422 (a body or parameter of the wrong
shape). Each router declares the errors its operations may give with `**ERRORS`, plus
`**CONFLICT` where an operation can answer 409 and `**INVALID` where it takes a body or a
typed parameter (so ninja can answer 422), so the OpenAPI document lists every status an
operation can give (tests/studio/api/test_openapi_fuzz.py holds them to it). `install`
maps a Refused and Django's exceptions (404, 403, a model's ValidationError, a database's
DataError as 400) onto the same shape for the one NinjaAPI; `page_not_found` does it for
a URL under /api/ that no route matches.

The pages' errors (`handler404`, `handler403`, `handler500`, `handler400` in studio/urls.py)
are rendered in the studio's layout, with its navigation, from frontend/templates/errors/:
a sentence and ways on, never a stack trace (with DEBUG off; DEBUG on shows Django's
technical pages, as it should to a developer). Under /api/ they keep the API's shape."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI, Schema
from ninja.parser import Parser


class Refused(Exception):
    """A request the studio will not do; `message` says why and what to do, `status` is
    the HTTP answer (a class default, or given per instance where one class's refusals
    answer differently). A status of 500 or more marks a fault of the server's rather
    than a refusal (a project's repository gone missing): it is answered as any other
    server error, logged, with no message."""

    status: int = 400
    code: str = ""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        """The API's answer: `{"detail": message}`; a subclass may add the fields its
        operations declare (DecisionRefused adds `reasons`)."""
        return {"detail": self.message}


class NotFound(Refused):
    status = 404


class Forbidden(Refused):
    status = 403


class Conflict(Refused):
    status = 409


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
            raise Refused(NUL_REFUSED)
        return parsed


def install(api: NinjaAPI) -> None:
    """Answer a `Refused` and Django's own exceptions in the `{"detail": ...}` shape."""

    def refused(request: HttpRequest, exc: object) -> HttpResponse:
        assert isinstance(exc, Refused)
        if exc.status >= 500:
            raise exc  # a server's fault: Django's handler500 answers "Server error" and logs it
        return api.create_response(request, exc.body(), status=exc.status)

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

    api.add_exception_handler(Refused, refused)
    api.add_exception_handler(Http404, not_found)
    api.add_exception_handler(DataError, unstorable)
    api.add_exception_handler(PermissionDenied, forbidden)
    api.add_exception_handler(ValidationError, invalid)


logger = logging.getLogger(__name__)

MINIMAL_500 = (
    "<!doctype html><title>Server error · Packforge studio</title>"
    '<h1>Server error</h1><p>The error is logged on the server. <a href="/">Back to the projects</a></p>'
)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _page(request: HttpRequest, status: int, **context: Any) -> HttpResponse:
    body = loader.render_to_string(f"errors/{status}.html", {"status": status, **context}, request=request)
    return HttpResponse(body, status=status)


PAGES = (400, 403, 404, 409)  # the statuses with a page of their own in frontend/templates/errors/


def refused_page(request: HttpRequest, exc: Refused) -> HttpResponse:
    """A refusal no view caught: its status and sentence, in the layout (the 400 page for
    a status without its own); under /api/ the API's shape."""
    if _is_api(request):
        return JsonResponse(exc.body(), status=exc.status)
    template = exc.status if exc.status in PAGES else 400
    body = loader.render_to_string(
        f"errors/{template}.html", {"status": exc.status, "reason": exc.message}, request=request
    )
    return HttpResponse(body, status=exc.status)


class RefusedMiddleware:
    """Answers a `Refused` that escapes a page view (a full page or an htmx partial) with
    `refused_page`, instead of a 500. The API's operations never get here: ninja answers
    them itself (`install`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Refused) and exception.status < 500:
            return refused_page(request, exception)
        return None


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 (`handler404`): a URL no route matches, or a view's Http404. Under /api/
    it is the API's own shape, so a client that reads JSON reads this too (a `{path}` with a
    newline in it matches no API route). A page says nothing of why (a stranger's 404 is the
    same as a project that does not exist)."""
    if _is_api(request):
        return JsonResponse({"detail": "Not found"}, status=404)
    return _page(request, 404)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """`handler403`: a view's PermissionDenied, whose message is written for the person
    ("your role on X is viewer; only authors can change it")."""
    reason = str(exception) if isinstance(exception, PermissionDenied) else ""
    if _is_api(request):
        return JsonResponse({"detail": reason or "Forbidden"}, status=403)
    return _page(request, 403, reason=reason)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """`CSRF_FAILURE_VIEW`: a form sent without its security token, or with a stale one
    (a page left open across a log-out, cookies refused). Django's reason is for
    developers; the page says what to do."""
    if _is_api(request):
        return JsonResponse({"detail": "CSRF check Failed"}, status=403)
    logger.warning("CSRF check failed on %s: %s", request.path, reason)
    return _page(
        request,
        403,
        csrf=True,
        reason="the form came without a valid security token (a page left open across a log-out, "
        "or cookies refused); reload the page and send it again",
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """`handler400`: a request Django could not take (a SuspiciousOperation, a bad form)."""
    if _is_api(request):
        return JsonResponse({"detail": "Bad request"}, status=400)
    return _page(request, 400)


def server_error(request: HttpRequest) -> HttpResponse:
    """`handler500`: the layout with its navigation when it can be drawn; if drawing it
    fails too (the database is what broke, and the navigation reads the session's user),
    the page without a user, then a line of HTML that needs nothing."""
    if _is_api(request):
        return JsonResponse({"detail": "Server error"}, status=500)
    try:
        return _page(request, 500)
    except Exception:
        logger.exception("the 500 page could not be drawn with the request; drawing it without")
    try:
        return HttpResponse(loader.render_to_string("errors/500.html", {"status": 500}), status=500)
    except Exception:
        logger.exception("the 500 page could not be drawn")
        return HttpResponse(MINIMAL_500, status=500)
