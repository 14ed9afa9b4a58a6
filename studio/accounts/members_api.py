"""The users and members API routes (gathered into studio.api); who may do what is
told in studio/accounts/members.py.

- `/api/users`: staff list, create (invite) users and make a new set-password link.
- `/api/projects/{slug}/members`: members read the list; authors and staff give a role
  (PUT, by username), change it, and take it away (DELETE). A name an author may not add
  is answered as a name no user has (members.addable_user)."""

from __future__ import annotations

from django.contrib.auth.models import User
from ninja import Field, Router, Schema, Status

from studio.accounts import members
from studio.accounts.models import Membership
from studio.errors import CONFLICT, ERRORS, INVALID
from studio.http import StudioRequest

users_router = Router(tags=["users"])
members_router = Router(tags=["members"])


class UserIn(Schema):
    username: str = Field(..., description="letters, digits and @.+-_ (Django's rule), 1-150 characters")
    email: str = Field("", description="for the record; nothing is emailed")
    staff: bool = Field(False, description="may create users and manage every project's members")


class UserOut(Schema):
    id: int
    username: str
    email: str
    staff: bool
    active: bool
    has_password: bool = Field(..., description="false until an invited user sets a password")


class InvitedOut(UserOut):
    set_password_url: str = Field(
        ..., description="a one-time link to pass on to the user: it sets their password (nothing is emailed)"
    )


class MemberIn(Schema):
    role: str = Field(..., description="author, reviewer or viewer")


class MemberOut(Schema):
    username: str
    role: str


def _user_out(user: User) -> UserOut:
    return UserOut(
        id=user.pk,
        username=user.username,
        email=user.email,
        staff=user.is_staff,
        active=user.is_active,
        has_password=user.has_usable_password(),
    )


def _member_out(row: Membership) -> MemberOut:
    return MemberOut(username=row.user.username, role=row.role)


@users_router.get("", response={200: list[UserOut], **ERRORS}, summary="Every user (staff only)")
def list_users(request: StudioRequest) -> list[UserOut]:
    members.require_staff(request.user)
    return [_user_out(u) for u in User.objects.order_by("username")]


@users_router.post(
    "",
    response={201: InvitedOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Invite a user (staff only): answers a one-time set-password link",
)
def create_user(request: StudioRequest, body: UserIn) -> Status[InvitedOut]:
    members.require_staff(request.user)
    user = members.invite(body.username, body.email, staff=body.staff)
    link = request.build_absolute_uri(members.set_password_path(user))
    return Status(201, InvitedOut(**_user_out(user).model_dump(), set_password_url=link))


@users_router.post(
    "/{username}/set-password-link",
    response={200: InvitedOut, **ERRORS, **INVALID},
    summary="A new one-time set-password link for a user (staff only)",
)
def password_link(request: StudioRequest, username: str) -> InvitedOut:
    members.require_staff(request.user)
    user = members.user_named(username)
    link = request.build_absolute_uri(members.set_password_path(user))
    return InvitedOut(**_user_out(user).model_dump(), set_password_url=link)


@members_router.get("/{slug}/members", response={200: list[MemberOut], **ERRORS}, summary="A project's members")
def list_members(request: StudioRequest, slug: str) -> list[MemberOut]:
    project, _ = members.members_of(request.user, slug)
    return [_member_out(row) for row in members.memberships(project)]


@members_router.put(
    "/{slug}/members/{username}",
    response={200: MemberOut, 201: MemberOut, **ERRORS, **CONFLICT, **INVALID},
    summary="Give a user a role on the project, or change it (authors and staff)",
)
def put_member(request: StudioRequest, slug: str, username: str, body: MemberIn) -> Status[MemberOut]:
    project, _ = members.members_of(request.user, slug, manage=True)
    role = members.parse_role(body.role)
    user = members.addable_user(request.user, username)
    row, created = members.grant(project, user, role)
    return Status(201 if created else 200, _member_out(row))


@members_router.delete(
    "/{slug}/members/{username}",
    response={204: None, **ERRORS, **CONFLICT},
    summary="Take a user's role on the project away (authors and staff)",
)
def delete_member(request: StudioRequest, slug: str, username: str) -> Status[None]:
    project, _ = members.members_of(request.user, slug, manage=True)
    user = members.member_named(project, username)
    members.revoke(project, user)
    return Status(204, None)
