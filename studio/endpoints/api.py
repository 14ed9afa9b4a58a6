"""The endpoints API routes (gathered into studio.api): list, get, create, check.

Same rules as the pages: anyone authenticated may read; only staff may create or
check. A check is a Celery task: POST .../check answers 202 and the endpoint with
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
from studio.errors import ERRORS

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


def _out(endpoint: Endpoint) -> EndpointOut:
    return EndpointOut(
        id=endpoint.pk,
        name=endpoint.name,
        spec=endpoint.spec,
        key_env=endpoint.key_env,
        price_in=float(endpoint.price_in),
        price_out=float(endpoint.price_out),
        concurrency=endpoint.concurrency,
        last_check=endpoint.last_check,
    )


def _require_staff(request: HttpRequest) -> None:
    if not can_manage(request.user):
        raise PermissionDenied("only staff may change model endpoints")


@router.get("", response={200: list[EndpointOut], **ERRORS}, summary="The model endpoints")
def list_endpoints(request: HttpRequest) -> list[EndpointOut]:
    return [_out(endpoint) for endpoint in Endpoint.objects.all()]


@router.get("/{endpoint_id}", response={200: EndpointOut, **ERRORS}, summary="One model endpoint")
def get_endpoint(request: HttpRequest, endpoint_id: int) -> EndpointOut:
    return _out(get_object_or_404(Endpoint, pk=endpoint_id))


@router.post("", response={201: EndpointOut, **ERRORS}, summary="Add a model endpoint (staff)")
def create_endpoint(request: HttpRequest, payload: EndpointIn) -> Status[EndpointOut]:
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
    return Status(201, _out(endpoint))


@router.post("/{endpoint_id}/check", response={202: EndpointOut, **ERRORS}, summary="Check a model endpoint (staff)")
def check_endpoint(request: HttpRequest, endpoint_id: int) -> Status[EndpointOut]:
    _require_staff(request)
    from studio.endpoints.tasks import check_endpoint as check_task

    endpoint = get_object_or_404(Endpoint, pk=endpoint_id)
    endpoint.last_check = {"state": "checking", "requested_at": timezone.now().isoformat()}
    endpoint.save(update_fields=["last_check"])
    check_task.delay_on_commit(endpoint.pk)
    return Status(202, _out(endpoint))
