"""The deployments API (gathered into studio.api under /api/deployments): deployments
(authors create and change them; members read them and their history) and deployment
tokens, and its health over time (health.py). The runs of a deployment are runs_api.py.
docs/serving.md."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from ninja import Field, Router, Schema, Status

from studio.accounts.access import project_for
from studio.accounts.models import ApiToken
from studio.deployments import health, promotion, service
from studio.deployments.access import deployment_for
from studio.deployments.models import Deployment, DeploymentChange
from studio.errors import ERRORS, INVALID, Refused
from studio.http import StudioRequest

router = Router(tags=["deployments"])


# -- deployments ------------------------------------------------------------------------


class TierOut(Schema):
    endpoint: int
    name: str


class DeploymentIn(Schema):
    project: str = Field(..., description="the project's slug")
    name: str = Field(..., description="lowercase letters, digits and dashes; names the deployment in URLs")
    version: str | None = Field(None, description="a commit of the pack (or a prefix); the newest when left out")
    tiers: list[int] = Field(default_factory=list, description="endpoint ids, smallest model first")
    webhook_url: str = ""
    webhook_secret: str = Field("", description="signs the webhook's body (HMAC-SHA256); never shown again")


class DeploymentPatch(Schema):
    version: str | None = Field(None, description="a promote: a version on main")
    tiers: list[int] | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None
    follow_main: bool | None = Field(None, description="promote to main's tip on every merge")


class PromoteIn(Schema):
    version: str | None = Field(None, description="a version on main (a sha or a prefix); main's tip when left out")
    note: str = Field("", description="why; kept in the deployment's history")


class RollbackIn(Schema):
    to: str | None = Field(None, description="a version it served before; the one before the current when left out")
    note: str = ""


class DeploymentOut(Schema):
    name: str
    project: str
    version: str
    tiers: list[TierOut]
    webhook_url: str
    has_webhook_secret: bool
    follow_main: bool
    created_by: str
    created_at: datetime
    updated_at: datetime


class ChangeOut(Schema):
    at: datetime
    user: str
    field: str  # created | version (a promote) | rollback | tiers | webhook_url | webhook_secret | follow_main
    old: Any
    new: Any
    note: str


class DeploymentTokenIn(Schema):
    name: str


class DeploymentTokenOut(Schema):
    id: int
    name: str
    prefix: str
    deployment: str
    created_at: datetime
    token: str = Field(..., description="shown only now; send it as 'Authorization: Bearer <token>'")


def _deployment_out(d: Deployment) -> DeploymentOut:
    names = service.tier_names(d)
    return DeploymentOut(
        name=d.name,
        project=d.project.slug,
        version=d.version,
        tiers=[TierOut(endpoint=pk, name=n) for pk, n in zip(d.tiers, names, strict=True)],
        webhook_url=d.webhook_url,
        has_webhook_secret=bool(d.webhook_secret),
        follow_main=d.follow_main,
        created_by=d.created_by.username,
        created_at=d.created_at,
        updated_at=d.updated_at,
    )


@router.get("", response={200: list[DeploymentOut], **ERRORS}, summary="Deployments of your projects")
def list_deployments(request: StudioRequest) -> list[DeploymentOut]:
    rows = Deployment.objects.select_related("project", "created_by")
    if not request.user.is_superuser:
        rows = rows.filter(project__memberships__user=request.user)
    return [_deployment_out(d) for d in rows.order_by("name")]


@router.post("", response={201: DeploymentOut, **ERRORS, **INVALID}, summary="Create a deployment (authors)")
def create_deployment(request: StudioRequest, body: DeploymentIn) -> Status[DeploymentOut]:
    project, _ = project_for(request.user, body.project, edit=True)
    made = service.create_deployment(
        project,
        user=request.user,
        name=body.name,
        version=body.version,
        tiers=body.tiers,
        webhook_url=body.webhook_url,
        webhook_secret=body.webhook_secret,
    )
    return Status(201, _deployment_out(made))


@router.get("/{name}", response={200: DeploymentOut, **ERRORS}, summary="A deployment")
def get_deployment(request: StudioRequest, name: str) -> DeploymentOut:
    deployment, _ = deployment_for(request.user, name)
    return _deployment_out(deployment)


@router.patch(
    "/{name}",
    response={200: DeploymentOut, **ERRORS, **INVALID},
    summary="Change a deployment's version, tiers or webhook (authors; written to its history)",
)
def change_deployment(request: StudioRequest, name: str, body: DeploymentPatch) -> DeploymentOut:
    deployment, _ = deployment_for(request.user, name, edit=True)
    service.change_deployment(deployment, user=request.user, **body.model_dump())
    return _deployment_out(deployment)


@router.delete("/{name}", response={204: None, **ERRORS}, summary="Delete a deployment and its runs (authors)")
def delete_deployment(request: StudioRequest, name: str) -> Status[None]:
    deployment, _ = deployment_for(request.user, name, edit=True)
    deployment.delete()
    return Status(204, None)


@router.get("/{name}/changes", response={200: list[ChangeOut], **ERRORS}, summary="A deployment's history")
def list_changes(request: StudioRequest, name: str) -> list[ChangeOut]:
    deployment, _ = deployment_for(request.user, name)
    rows = DeploymentChange.objects.filter(deployment=deployment).select_related("user")
    return [_change_out(c) for c in rows]


def _change_out(c: DeploymentChange) -> ChangeOut:
    return ChangeOut(at=c.at, user=c.user.username, field=c.field, old=c.old, new=c.new, note=c.note)


@router.post(
    "/{name}/promote",
    response={200: ChangeOut, **ERRORS, **INVALID},
    summary="Serve a version on main (authors; written to its history with the note)",
)
def promote(request: StudioRequest, name: str, body: PromoteIn) -> ChangeOut:
    deployment, _ = deployment_for(request.user, name, edit=True)
    return _change_out(promotion.promote(deployment, body.version, user=request.user, note=body.note))


@router.post(
    "/{name}/rollback",
    response={200: ChangeOut, **ERRORS, **INVALID},
    summary="Serve a version it served before again (authors; written to its history with the note)",
)
def rollback(request: StudioRequest, name: str, body: RollbackIn) -> ChangeOut:
    deployment, _ = deployment_for(request.user, name, edit=True)
    return _change_out(promotion.rollback(deployment, body.to, user=request.user, note=body.note))


@router.post(
    "/{name}/tokens",
    response={201: DeploymentTokenOut, **ERRORS, **INVALID},
    summary="Make a token that may only submit and read this deployment's runs (authors)",
)
def create_token(request: StudioRequest, name: str, body: DeploymentTokenIn) -> Status[DeploymentTokenOut]:
    deployment, _ = deployment_for(request.user, name, edit=True)
    label = body.name.strip()
    if not label or len(label) > 100:
        raise Refused("give the token a name of 1-100 characters")
    row, token = ApiToken.issue(request.user, label, deployment=deployment)
    return Status(
        201,
        DeploymentTokenOut(
            id=row.pk, name=row.name, prefix=row.prefix, deployment=name, created_at=row.created_at, token=token
        ),
    )


# -- health over time (studio/deployments/health.py) --------------------------------------


class HealthTierOut(Schema):
    tier: str
    runs: int = Field(..., description="done runs this tier settled ('person': a reviewer answered)")
    share: float = Field(..., description="runs / the bucket's outcomes")


class HealthReasonOut(Schema):
    reason: str = Field(..., description="the escalation's reason without its detail ('fail: ...', 'unsure: ...')")
    count: int


class HealthBucketOut(Schema):
    start: datetime
    end: datetime
    runs: int = Field(..., description="runs submitted in the bucket")
    outcomes: int = Field(..., description="of those, done, failed or waiting for a person: the shares' denominator")
    auto: int
    auto_share: float | None = Field(..., description="done by a model tier, over outcomes; null without outcomes")
    failed: int
    waiting: int
    escalated: int = Field(..., description="outcomes that escalated at least once")
    escalation_rate: float | None
    reasons: list[HealthReasonOut] = Field(..., description="escalation events by reason, most first")
    tiers: list[HealthTierOut]
    latency_runs: int = Field(..., description="runs that ended done or failed without a person")
    latency_p50_s: float | None = Field(..., description="submission to end, seconds")
    latency_p95_s: float | None
    cost_runs: int = Field(..., description="ended runs whose trace holds a cost")
    cost_per_run_usd: float | None = Field(..., description="null: no run of the bucket has a known cost")
    review_backlog: int = Field(..., description="review items open at the bucket's end")


class HealthOut(Schema):
    deployment: str
    bucket: Literal["hour", "day"]
    since: datetime
    until: datetime
    priced: bool = Field(..., description="false: every known cost is 0 (the tiers' endpoints have no price set)")
    buckets: list[HealthBucketOut] = Field(..., description="oldest first, UTC")
    total: HealthBucketOut = Field(..., description="the whole window; backlog at its end")


@router.get(
    "/{name}/health",
    response={200: HealthOut, **ERRORS, **INVALID},
    summary="A deployment's runs per hour or day: auto share, escalations, tiers, latency, cost, review backlog",
)
def deployment_health(
    request: StudioRequest,
    name: str,
    bucket: Literal["hour", "day"] = "day",
    since: datetime | None = None,
    until: datetime | None = None,
) -> HealthOut:
    """Without `since`, the last 7 days (bucket=day) or 48 hours (bucket=hour) up to
    `until` (now when left out). At most 90 buckets; more is answered 400."""
    deployment, _ = deployment_for(request.user, name)
    found = health.health(deployment, health.window(bucket, since, until))
    return HealthOut.model_validate(asdict(found))
