"""The accounts API routes (gathered into studio.api): the current user's API tokens.

A token's plaintext is answered once, by the create call; only its SHA-256 is stored."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Router, Schema, Status

from studio.accounts.models import ApiToken
from studio.errors import ERRORS, INVALID, NotFound, Refused
from studio.http import StudioRequest

router = Router(tags=["accounts"])


class TokenIn(Schema):
    name: str = Field(..., description="what the token is for, e.g. 'ci' or 'laptop'")


class TokenOut(Schema):
    id: int
    name: str
    prefix: str = Field(..., description="the token's first characters, to tell tokens apart")
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


class TokenCreatedOut(TokenOut):
    token: str = Field(..., description="the token itself; shown only now. Send it as 'Authorization: Bearer <token>'")


def _out(row: ApiToken) -> TokenOut:
    return TokenOut(
        id=row.pk,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked=row.revoked,
    )


@router.get("", response={200: list[TokenOut], **ERRORS}, summary="Your API tokens")
def list_tokens(request: StudioRequest) -> list[TokenOut]:
    return [_out(row) for row in ApiToken.objects.filter(user=request.user).order_by("-created_at", "-pk")]


@router.post(
    "",
    response={201: TokenCreatedOut, **ERRORS, **INVALID},
    summary="Make an API token (its plaintext is in this answer only)",
)
def create_token(request: StudioRequest, body: TokenIn) -> Status[TokenCreatedOut]:
    name = body.name.strip()
    if not name or len(name) > 100:
        raise Refused("give the token a name of 1-100 characters")
    row, token = ApiToken.issue(request.user, name)
    return Status(201, TokenCreatedOut(**_out(row).model_dump(), token=token))


@router.delete("/{token_id}", response={204: None, **ERRORS, **INVALID}, summary="Revoke one of your tokens")
def revoke_token(request: StudioRequest, token_id: int) -> Status[None]:
    if not ApiToken.objects.filter(pk=token_id, user=request.user).update(revoked=True):
        raise NotFound(f"you have no token {token_id}")
    return Status(204, None)
