"""Users and project memberships: who may invite people, and who may give them a role.

- **Staff** (`is_staff` or `is_superuser`) create and invite users, list every user, and
  manage the members of any project (a staff user need not be a member to do it).
- A project's **authors** manage that project's members: they give a role to a user
  they already share a project with, change it, or take it away. They cannot create
  users, and naming someone else answers exactly as naming no one (`addable_user`).
- Reviewers and viewers read the member list; a stranger gets 404 (as for every project
  page), a member without the right to manage gets 403.
- A project keeps at least one author: removing or demoting its last author is refused
  (409), so a project is never left without anyone who can edit it or its members.

**Invite** = create the user with an unusable password and make a one-time link to set
one (Django's password-reset token: it stops working once the password is set, or after
PASSWORD_RESET_TIMEOUT). Nothing is emailed (the studio has no mail server): the link is
shown to the staff user who made it, to pass on.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.http import Http404
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from studio.accounts.access import project_for
from studio.accounts.models import Membership, Role
from studio.errors import Conflict
from studio.projects.models import Project

USERNAME_MAX = 150


class MemberConflict(Conflict):
    """A change that would leave a project without an author, or a taken username."""


def is_staff(user: User) -> bool:
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def require_staff(user: User) -> None:
    if not is_staff(user):
        raise PermissionDenied("only staff may create and invite users")


def members_of(user: User, slug: str, *, manage: bool = False) -> tuple[Project, bool]:
    """The project and whether `user` may manage its members. Staff: any project.
    Others: a stranger gets 404; with `manage`, a non-author member gets 403."""
    if is_staff(user):
        project = Project.objects.filter(slug=slug).first() if "\x00" not in slug else None
        if project is None:
            raise Http404("No such project")
        return project, True
    project, role = project_for(user, slug)
    if manage and not role.can_edit:
        raise PermissionDenied(
            f"your role on {project.slug} is {role.value}; only authors and staff manage its members"
        )
    return project, role.can_edit


def memberships(project: Project) -> list[Membership]:
    return list(Membership.objects.filter(project=project).select_related("user").order_by("user__username"))


def user_named(username: str) -> User:
    found = User.objects.filter(username=username).first() if "\x00" not in username else None
    if found is None:
        raise Http404(f"no user named {username!r}")
    return found


def not_addable(username: str) -> str:
    return (
        f"no user named {username!r} that you can add: you can add people you already share a project "
        "with; staff add anyone (and invite new users on the Users page)"
    )


def addable_user(manager: User, username: str) -> User:
    """The user `manager` may give a role by naming them: for staff, any user; for an
    author, only a user who already shares a project with them. Anyone else is answered
    exactly as a name no user has (Http404, `not_addable`), so that a project of one's
    own is not a way to learn which usernames exist (issue 22)."""
    found = User.objects.filter(username=username) if "\x00" not in username else User.objects.none()
    if not is_staff(manager):
        found = found.filter(memberships__project__memberships__user=manager)
    user = found.distinct().first()
    if user is None:
        raise Http404(not_addable(username))
    return user


def member_named(project: Project, username: str) -> User:
    """A member of `project` by username; anyone else, user or not, is 404."""
    members = Membership.objects.filter(project=project, user__username=username) if "\x00" not in username else None
    row = members.select_related("user").first() if members is not None else None
    if row is None:
        raise Http404(f"{username!r} is not a member of {project.slug}")
    return row.user


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        choices = ", ".join(r.value for r in Role)
        raise ValidationError(f"role must be one of {choices}, not {value!r}") from None


def _other_authors(project: Project, user: User) -> bool:
    return Membership.objects.filter(project=project, role=Role.AUTHOR).exclude(user=user).exists()


def grant(project: Project, user: User, role: Role) -> tuple[Membership, bool]:
    """Give `user` `role` on `project` (a new membership, or a changed role). True when
    the membership is new. Demoting the last author is a MemberConflict."""
    with transaction.atomic():
        row = Membership.objects.select_for_update().filter(project=project, user=user).first()
        if row is None:
            try:
                with transaction.atomic():
                    return Membership.objects.create(project=project, user=user, role=role), True
            except IntegrityError:  # another request made it first: change that one
                row = Membership.objects.select_for_update().get(project=project, user=user)
        if row.role == Role.AUTHOR and role != Role.AUTHOR and not _other_authors(project, user):
            raise MemberConflict(
                f"{user.username} is the last author of {project.slug}; make someone else author first"
            )
        row.role = role
        row.save(update_fields=["role"])
        return row, False


def revoke(project: Project, user: User) -> None:
    """Take away `user`'s role on `project` (404 when there is none)."""
    with transaction.atomic():
        row = Membership.objects.select_for_update().filter(project=project, user=user).first()
        if row is None:
            raise Http404(f"{user.username} is not a member of {project.slug}")
        if row.role == Role.AUTHOR and not _other_authors(project, user):
            raise MemberConflict(
                f"{user.username} is the last author of {project.slug}; make someone else author first"
            )
        row.delete()


def clean_new_user(username: str, email: str) -> tuple[str, str]:
    """The username and email of a user to create, or a ValidationError that says why."""
    username = username.strip()
    email = email.strip()
    if not username or len(username) > USERNAME_MAX:
        raise ValidationError(f"give a username of 1-{USERNAME_MAX} characters")
    User.username_validator(username)
    if email:
        validate_email(email)
    return username, email


def invite(username: str, email: str = "", *, staff: bool = False) -> User:
    """Create a user who cannot log in until they set a password through `set_password_path`."""
    username, email = clean_new_user(username, email)
    try:
        with transaction.atomic():
            user = User(username=username, email=email, is_staff=staff)
            user.set_unusable_password()
            user.save()
    except IntegrityError:
        raise MemberConflict(f"a user named {username!r} exists") from None
    return user


def set_password_path(user: User) -> str:
    """The one-time link (a path; the caller makes it absolute) to set `user`'s password.
    Valid until the password changes (setting it spends the link) or PASSWORD_RESET_TIMEOUT."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("accounts-set-password", kwargs={"uidb64": uid, "token": default_token_generator.make_token(user)})
