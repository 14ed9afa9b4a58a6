"""API authentication: a bearer token (CLI, CI) or the browser's session (with CSRF)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from studio.accounts.models import ApiToken


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        row = ApiToken.authenticate(token)
        if row is None:
            return None
        request.user = row.user
        return row.user


API_AUTH = [TokenAuth(), SessionAuth(csrf=True)]
