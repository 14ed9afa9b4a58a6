"""A deployment as an MCP server: `/mcp/deployments/<name>` (streamable HTTP, stateless,
JSON responses) lists one tool, the deployment's pack, and a call submits an ordinary
ServedRun (studio.deployments.service.submit: a trace, a checkpoint, the review queue
when it waits), waits for it as `?wait=` does, and answers its output, tier and run id,
or `waiting` with the node and the review item. docs/tools.md, "MCP".

Gunicorn serves the studio over WSGI, so the SDK's ASGI app cannot be mounted as is:
this view authenticates the request, then hands it to the SDK's own stateless
transport in a fresh event loop (runtime.mcp_answer_http) and returns what it
answered. Stateless means no session and no server-sent stream: GET and DELETE answer
405, which the SDK's client handles; every request carries its bearer token.

Who may call: a deployment-scoped API token of this deployment, or a user's token
whose user may submit runs to it (an author of its project). No token, a bad one or
another deployment's token: 401. A user who is no member: 404 (names do not leak); a
member who is not an author: 403."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from runtime import McpEntry, McpTool, ToolAnswer, mcp_answer_http, pack_tool, run_payload
from studio import packs
from studio.accounts.models import ApiToken
from studio.deployments import service
from studio.deployments.access import deployment_for
from studio.deployments.models import Deployment, ServedRun
from studio.deployments.settings import setting

REVIEW_ITEM_GRACE_S = 5.0  # a waiting run's review item is made just after it commits
# Every header reaches the SDK (the protocol routes on Mcp-* headers, more in newer
# revisions) except the credentials, which the view has used and the SDK must not see.
_WITHHELD = ("authorization", "cookie", "proxy-authorization")
_tools: dict[tuple[int, str], McpTool] = {}  # (project, version) -> its tool: a version never changes
_tools_lock = threading.Lock()


def _refused(status: int, detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="packforge"'
    return response


def _token(request: HttpRequest, name: str) -> ApiToken | JsonResponse:
    value = request.headers.get("Authorization", "")
    scheme, _, token = value.partition(" ")
    if not value:
        return _refused(401, "send an API token: 'Authorization: Bearer <token>'")
    if scheme.lower() != "bearer" or not token.strip():
        return _refused(401, "the Authorization header must be 'Bearer <token>'")
    row = ApiToken.authenticate(token.strip())
    if row is None:
        return _refused(401, "invalid or revoked token")
    if row.deployment is not None and row.deployment.name != name:
        return _refused(401, f"this token may only be used on deployment {row.deployment.name!r}")
    return row


def tool_for(deployment: Deployment) -> McpTool:
    """The MCP tool of the deployment's pack version (loaded once per version)."""
    key = (deployment.project_id, deployment.version)
    with _tools_lock:
        found = _tools.get(key)
    if found is None:
        with packs.loaded(deployment.project, deployment.version, own_model=False) as got:
            found = pack_tool(got.pack)
        with _tools_lock:
            if len(_tools) > 256:
                _tools.clear()
            _tools[key] = found
    return found


def _settled(run: ServedRun) -> bool:
    return run.is_final or run.status == ServedRun.Status.WAITING


def _review_item(run: ServedRun) -> int | None:
    try:
        model = apps.get_model("review.ReviewItem")  # the review queue's (studio/review/), when installed
    except LookupError:
        return None
    return model._default_manager.filter(run_id=run.pk).order_by("-pk").values_list("pk", flat=True).first()


def wait_for_run(run: ServedRun, seconds: float) -> tuple[ServedRun, int | None]:
    """The run once it ends or waits (or `seconds` pass), and a waiting run's review item."""
    deadline = time.monotonic() + seconds
    delay = 0.01
    while not _settled(run) and time.monotonic() < deadline:
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.2)
        run.refresh_from_db()
    item = None
    if run.status == ServedRun.Status.WAITING:
        grace = time.monotonic() + REVIEW_ITEM_GRACE_S
        while (item := _review_item(run)) is None and time.monotonic() < grace:
            time.sleep(0.05)
    return run, item


def answer_for(run: ServedRun, review_item: int | None) -> ToolAnswer:
    payload = run_payload(
        run_id=run.run_id,
        status=run.status,
        output=run.output,
        tier=run.tier,
        waiting_at=run.waiting_at or None,
        review_item=review_item,
        error=run.error or None,
    )
    return ToolAnswer(payload, is_error=run.status in (ServedRun.Status.FAILED, ServedRun.Status.CANCELLED))


def call_deployment(deployment: Deployment, user: User, arguments: dict[str, Any]) -> ToolAnswer:
    """One MCP tool call: submit an ordinary ServedRun and wait for it, at most
    PACKFORGE_SERVE_MAX_WAIT_S (then it answers `queued`/`running` with the run id, to
    be read from the runs API). Runs in the SDK's worker thread: it closes the database
    connection it opened."""
    try:
        try:
            got = service.submit(deployment, arguments, run_id=None, user=user)
        except (service.Refused, service.Conflict) as exc:
            return ToolAnswer({"error": str(exc)}, is_error=True)
        run, item = wait_for_run(got.run, float(setting("PACKFORGE_SERVE_MAX_WAIT_S")))
        return answer_for(run, item)
    finally:
        connection.close()


@csrf_exempt  # no cookies are read: the bearer token is the credential
@login_not_required  # the token is checked here, with a 401 an MCP client understands
def deployment_mcp(request: HttpRequest, name: str) -> HttpResponse:
    row = _token(request, name)
    if isinstance(row, JsonResponse):
        return row
    try:
        deployment, _ = deployment_for(row.user, name, edit=True)
    except Http404:
        return _refused(404, "No such deployment")
    except PermissionDenied as exc:
        return _refused(403, str(exc))
    if request.method != "POST":
        # Stateless: no server-sent stream to GET and no session to DELETE. The SDK's
        # transport would hold a GET open for ever (a gunicorn worker lost); the spec's
        # answer for a server without a stream is 405, which the SDK's client expects.
        refused = _refused(405, "this endpoint is stateless: POST JSON-RPC messages to it")
        refused["Allow"] = "POST"
        return refused
    try:
        tool = tool_for(deployment)
    except packs.PackUnrunnable as exc:
        return _refused(409, f"the deployment's pack does not load: {exc}")
    user = row.user

    def call(arguments: dict[str, Any]) -> ToolAnswer:
        return call_deployment(deployment, user, arguments)

    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _WITHHELD]
    answer = mcp_answer_http(
        [McpEntry(tool, call)],
        name=f"packforge-{deployment.name}",
        method=request.method or "GET",
        path=request.path,
        headers=headers,
        body=request.body,
    )
    out = HttpResponse(answer.body, status=answer.status)
    for key, value in answer.headers:
        if key.lower() not in ("content-length", "connection", "transfer-encoding"):
            out[key] = value
    return out
