"""API authentication: a bearer token (CLI, CI) or the browser's session (with CSRF).

Every failure is a 401 in the {"detail": ...} shape that says what to fix; a CSRF
complaint (403) is only made to a request that does carry a logged-in session."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer, SessionAuth

from studio.accounts.models import ApiToken


class TokenAuth(HttpBearer):
    def __call__(self, request: HttpRequest) -> Any:
        # ninja's HttpBearer logs a malformed header in DEBUG; a token must never reach a log.
        value = request.headers.get(self.header)
        if not value:
            return None  # no header: let the session try
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError(message="the Authorization header must be 'Bearer <token>'")
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        # A header that names a bad token is refused outright, even with a session cookie:
        # a CLI with a revoked token must hear so, not be answered as someone else.
        row = ApiToken.authenticate(token)
        if row is None:
            raise AuthenticationError(message="invalid or revoked token")
        if row.deployment is not None and not row.allows(request.path_info):
            # A deployment-scoped token submits and reads that deployment's runs, nothing else.
            raise PermissionDenied(f"this token may only be used on the runs of deployment {row.deployment.name!r}")
        request.user = row.user
        request.api_token = row  # type: ignore[attr-defined]
        return row.user


class CsrfSessionAuth(SessionAuth):
    """The browser's session, with Django's CSRF check on unsafe methods. Without a
    logged-in session there is nothing to protect: answer 401, not 'CSRF failed'."""

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)


API_AUTH = [TokenAuth(), CsrfSessionAuth(csrf=True)]
