"""Model endpoint pages. Anyone logged in may see them; only staff (or superusers) may
create, edit, delete or check one, because an endpoint is shared by every project and
a check spends a model call. Function views that return early; htmx gets fragments."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from runtime import PackforgeError
from studio.accounts.access import can_manage_endpoints, endpoint_for, require_endpoint_manager
from studio.endpoints.backends import plain_number
from studio.endpoints.forms import EndpointForm
from studio.endpoints.models import Endpoint
from studio.host_tools import registry_broken, tool_registry
from studio.http import StudioRequest

# A check still queued after this long is reported (is a worker running?) and the
# page stops asking.
CHECK_PATIENCE = timedelta(seconds=60)


def _decorate(endpoint: Endpoint) -> Endpoint:
    """What the pages show beside the row: whether the key's variable is set in this
    process (never its value), and where a check stands."""
    endpoint.key_is_set = bool(endpoint.key_env and os.environ.get(endpoint.key_env))  # type: ignore[attr-defined]
    endpoint.prices = f"{plain_number(endpoint.price_in)} / {plain_number(endpoint.price_out)}"  # type: ignore[attr-defined]
    check = endpoint.last_check or {}
    checking = check.get("state") == "checking"
    stale = False
    if checking:
        try:
            stale = timezone.now() - datetime.fromisoformat(check["requested_at"]) > CHECK_PATIENCE
        except (KeyError, TypeError, ValueError):
            stale = True
    endpoint.checking = checking and not stale  # type: ignore[attr-defined]
    endpoint.check_stale = stale  # type: ignore[attr-defined]
    return endpoint


def endpoints_list(request: StudioRequest) -> HttpResponse:
    endpoints = [_decorate(e) for e in Endpoint.objects.all()]
    context = {"endpoints": endpoints, "can_manage": can_manage_endpoints(request.user)}
    if request.htmx:
        return render(request, "endpoints/list.html#endpoints-table", context)
    return render(request, "endpoints/list.html", context)


def tools_list(request: StudioRequest) -> HttpResponse:
    """The studio's host tool registry (PACKFORGE_TOOLS): every tool with its state
    (available, or unavailable for a missing dependency), side effects and schemas."""
    ref = str(settings.PACKFORGE_TOOLS).strip()
    tools: list[dict[str, object]] = []
    problem = None
    try:
        registry = tool_registry()
    except PackforgeError as exc:
        problem = registry_broken(exc)
    else:
        for entry in registry.catalogue() if registry is not None else []:
            schemas = {"args": entry["args"], "result": entry["result"]}
            tools.append({**entry, "schemas": json.dumps(schemas, indent=2)})
    unavailable = sum(1 for t in tools if not t["available"])
    context = {"ref": ref, "tools": tools, "problem": problem, "unavailable": unavailable}
    return render(request, "endpoints/tools.html", context)


def endpoint_create(request: StudioRequest) -> HttpResponse:
    require_endpoint_manager(request.user)
    form = EndpointForm(request.POST or None)
    if request.method != "POST" or not form.is_valid():
        status = 400 if request.method == "POST" else 200
        return render(request, "endpoints/form.html", {"form": form, "endpoint": None}, status=status)
    endpoint = form.save(commit=False)
    endpoint.created_by = request.user
    endpoint.save()
    messages.success(request, f"Endpoint {endpoint.name} added.")
    return redirect("endpoints-list")


def endpoint_edit(request: StudioRequest, endpoint_id: int) -> HttpResponse:
    endpoint = endpoint_for(request.user, endpoint_id, manage=True)
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method != "POST" or not form.is_valid():
        status = 400 if request.method == "POST" else 200
        return render(request, "endpoints/form.html", {"form": form, "endpoint": endpoint}, status=status)
    endpoint = form.save(commit=False)
    if {"spec", "key_env", "concurrency"} & set(form.changed_data):
        endpoint.last_check = None  # a reading of the old settings says nothing of the new ones
    endpoint.save()
    messages.success(request, f"Endpoint {endpoint.name} saved.")
    return redirect("endpoints-list")


@require_POST
def endpoint_delete(request: StudioRequest, endpoint_id: int) -> HttpResponse:
    endpoint = endpoint_for(request.user, endpoint_id, manage=True)
    endpoint.delete()
    messages.success(request, f"Endpoint {endpoint.name} deleted.")
    return redirect("endpoints-list")


@require_http_methods(["GET", "POST"])
def endpoint_check(request: StudioRequest, endpoint_id: int) -> HttpResponse:
    """POST: queue a check (a Celery task) and answer with the polling fragment.
    GET: the fragment, polled every second while the check is queued or running;
    286 (stop polling) once it has a result."""
    endpoint = endpoint_for(request.user, endpoint_id, manage=request.method == "POST")
    if request.method == "POST":
        from studio.endpoints.tasks import check_endpoint

        endpoint.last_check = {"state": "checking", "requested_at": timezone.now().isoformat()}
        endpoint.save(update_fields=["last_check"])
        check_endpoint.delay_on_commit(endpoint.pk)
        if not request.htmx:
            messages.success(request, f"Checking {endpoint.name}.")
            return redirect("endpoints-list")
    elif not request.htmx:
        return redirect("endpoints-list")
    endpoint = _decorate(endpoint)
    context = {"e": endpoint, "can_manage": can_manage_endpoints(request.user)}
    page = render(request, "endpoints/list.html#endpoint-check", context)
    if endpoint.checking:  # type: ignore[attr-defined]
        return page
    return HttpResponseStopPolling(page.content)
