"""`GET /metrics`, for Prometheus: staff only, by session or by a staff user's API token.

Prometheus scrapes with `authorization: {type: Bearer, credentials: <token>}`
(docs/serving.md, "Metrics"). No credentials: 401 with `WWW-Authenticate: Bearer`; a
bad or revoked token: 401; a token scoped to a deployment, or a user who is not
staff: 403."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from studio.accounts.members import is_staff
from studio.accounts.models import ApiToken
from studio.ops.metrics import StudioCollector


def _refused(status: int, detail: str) -> HttpResponse:
    response = HttpResponse(detail + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="packforge metrics"'
    return response


@login_not_required  # answers 401 itself: a scraper cannot follow a login redirect
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        row = ApiToken.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if row is None:
            return _refused(401, "invalid or revoked token")
        if getattr(row, "deployment_id", None) is not None:
            return _refused(403, "a deployment's token may not read metrics")
        user = row.user
    elif request.user.is_authenticated:
        user = request.user
    else:
        return _refused(401, "send a staff user's API token: Authorization: Bearer <token>")
    if not is_staff(user):
        return _refused(403, "only staff may read metrics")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StudioCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
