"""The endpoints API routes (gathered into studio.api): list, get, create, check.

Same rules as the pages: anyone authenticated may read (a check's details, staff
only: studio.redaction.visible_check); only staff may create or check. A check is a Celery task: POST .../check answers 202 and the endpoint with
`last_check.state == "checking"`; GET the endpoint until the state is "done"."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from studio.endpoints.forms import EndpointForm
from studio.endpoints.models import Endpoint
from studio.endpoints.views import can_manage
from studio.redaction import visible_check

router = Router(tags=["endpoints"])


class EndpointIn(Schema):
    name: str
    spec: str
    key_env: str = ""
    price_in: Decimal = Decimal(0)
    price_out: Decimal = Decimal(0)
    concurrency: int = 4


class EndpointOut(Schema):
    id: int
    name: str
    spec: str
    key_env: str
    price_in: float
    price_out: float
    concurrency: int
    last_check: dict[str, Any] | None


def _require_staff(request: HttpRequest) -> None:
    if not can_manage(request.user):
        raise PermissionDenied("only staff may change model endpoints")


def _shown(endpoint: Endpoint, request: HttpRequest) -> Endpoint:
    """The endpoint as this reader sees it: check details for staff only (not saved)."""
    endpoint.last_check = visible_check(endpoint.last_check, staff=can_manage(request.user))
    return endpoint


@router.get("", response=list[EndpointOut])
def list_endpoints(request: HttpRequest) -> Any:
    return [_shown(e, request) for e in Endpoint.objects.all()]


@router.get("/{endpoint_id}", response=EndpointOut)
def get_endpoint(request: HttpRequest, endpoint_id: int) -> Any:
    return _shown(get_object_or_404(Endpoint, pk=endpoint_id), request)


@router.post("", response={201: EndpointOut})
def create_endpoint(request: HttpRequest, payload: EndpointIn) -> Any:
    _require_staff(request)
    form = EndpointForm(data=payload.dict())
    if not form.is_valid():
        problems = [
            f"{name}: {' '.join(errors)}" if name != "__all__" else " ".join(errors)
            for name, errors in form.errors.items()
        ]
        raise HttpError(400, "; ".join(problems))
    endpoint = form.save(commit=False)
    endpoint.created_by = request.user
    endpoint.save()
    return Status(201, endpoint)


@router.post("/{endpoint_id}/check", response={202: EndpointOut})
def check_endpoint(request: HttpRequest, endpoint_id: int) -> Any:
    _require_staff(request)
    from studio.endpoints.tasks import check_endpoint as check_task

    endpoint = get_object_or_404(Endpoint, pk=endpoint_id)
    endpoint.last_check = {"state": "checking", "requested_at": timezone.now().isoformat()}
    endpoint.save(update_fields=["last_check"])
    check_task.delay_on_commit(endpoint.pk)
    return Status(202, endpoint)
