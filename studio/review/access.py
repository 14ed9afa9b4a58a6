"""Who may see and work review items: the one helper every review page and API
operation uses (as studio.accounts.access does for projects).

Any member of the item's project may read it (a stranger gets 404, so ids do not
leak); claiming, deciding and adding to gold take the reviewer or author role (403
for a viewer)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from studio.accounts.models import Membership, Role
from studio.numbers import whole_number
from studio.review.models import ReviewItem

WORKERS = (Role.REVIEWER, Role.AUTHOR)


def can_work(role: Role) -> bool:
    return role in WORKERS


def item_for(user: User, pk: int, *, work: bool = False) -> tuple[ReviewItem, Role]:
    """The item (run, deployment, project, claimer and decider joined) and the user's
    role on its project; `work` asks for a reviewer or author (403 otherwise)."""
    if whole_number(pk) is None:
        raise Http404("No such review item")
    item = (
        ReviewItem.objects.select_related("run", "deployment", "project", "claimed_by", "decided_by")
        .filter(pk=pk)
        .first()
    )
    if item is None:
        raise Http404("No such review item")
    role = item.project.role_of(user)
    if role is None:
        raise Http404("No such review item")
    if work and not can_work(role):
        raise PermissionDenied(f"your role on {item.project.slug} is {role.value}; only reviewers and authors decide")
    return item, role


def visible_items(user: User) -> QuerySet[ReviewItem]:
    """Items of every project the user is a member of (all of them for a superuser)."""
    items = ReviewItem.objects.all()
    if not user.is_superuser:
        items = items.filter(project__in=Membership.objects.filter(user=user).values("project"))
    return items


def roles_of(user: User) -> dict[int, Role]:
    """project pk -> the user's role, for the projects the user belongs to."""
    return {pk: Role(role) for pk, role in Membership.objects.filter(user=user).values_list("project", "role")}
