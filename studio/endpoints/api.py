"""The endpoints API routes (gathered into studio.api): list, get, create, check.

Same rules as the pages: anyone authenticated may read (a check's details, staff
only: studio.redaction.visible_check); only staff may create or check. A check is a Celery task: POST .../check answers 202 and the endpoint with
`last_check.state == "checking"`; GET the endpoint until the state is "done"."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils import timezone
from ninja import Router, Schema, Status

from studio.accounts.access import can_manage_endpoints, endpoint_for, require_endpoint_manager
from studio.endpoints.forms import EndpointForm
from studio.endpoints.models import Endpoint
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest
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


def _out(endpoint: Endpoint, request: StudioRequest) -> EndpointOut:
    """The endpoint as this reader sees it: check details for staff only."""
    return EndpointOut(
        id=endpoint.pk,
        name=endpoint.name,
        spec=endpoint.spec,
        key_env=endpoint.key_env,
        price_in=float(endpoint.price_in),
        price_out=float(endpoint.price_out),
        concurrency=endpoint.concurrency,
        last_check=visible_check(endpoint.last_check, staff=can_manage_endpoints(request.user)),
    )


@router.get("", response={200: list[EndpointOut], **ERRORS}, summary="The model endpoints")
def list_endpoints(request: StudioRequest) -> list[EndpointOut]:
    return [_out(endpoint, request) for endpoint in Endpoint.objects.all()]


@router.get("/{endpoint_id}", response={200: EndpointOut, **ERRORS, **INVALID}, summary="One model endpoint")
def get_endpoint(request: StudioRequest, endpoint_id: int) -> EndpointOut:
    return _out(endpoint_for(request.user, endpoint_id), request)


@router.post("", response={201: EndpointOut, **ERRORS, **INVALID}, summary="Add a model endpoint (staff)")
def create_endpoint(request: StudioRequest, payload: EndpointIn) -> Status[EndpointOut]:
    require_endpoint_manager(request.user)
    form = EndpointForm(data=payload.dict())
    if not form.is_valid():
        problems = [
            f"{name}: {' '.join(str(e) for e in errors)}" if name != "__all__" else " ".join(str(e) for e in errors)
            for name, errors in form.errors.items()
        ]
        raise Refused("; ".join(problems))
    endpoint = form.save(commit=False)
    endpoint.created_by = request.user
    endpoint.save()
    return Status(201, _out(endpoint, request))


@router.post(
    "/{endpoint_id}/check", response={202: EndpointOut, **ERRORS, **INVALID}, summary="Check a model endpoint (staff)"
)
def check_endpoint(request: StudioRequest, endpoint_id: int) -> Status[EndpointOut]:
    endpoint = endpoint_for(request.user, endpoint_id, manage=True)
    from studio.endpoints.tasks import check_endpoint as check_task

    endpoint.last_check = {"state": "checking", "requested_at": timezone.now().isoformat()}
    endpoint.save(update_fields=["last_check"])
    check_task.delay_on_commit(endpoint.pk)
    return Status(202, _out(endpoint, request))
