"""What the cross-project lists show: every eval, every recent try-it run, of the
projects the user is a member of (a superuser: of every project), newest first."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from studio.evals.models import Eval
from studio.runs.models import TryRun

__all__ = ["visible_evals", "visible_runs"]


def visible_evals(user: User | AnonymousUser) -> QuerySet[Eval]:
    rows = Eval.objects.all()
    if not isinstance(user, User):
        return rows.none()
    if not user.is_superuser:
        rows = rows.filter(project__memberships__user=user)
    return rows.order_by("-created_at", "-pk")


def visible_runs(user: User | AnonymousUser) -> QuerySet[TryRun]:
    rows = TryRun.objects.all()
    if not isinstance(user, User):
        return rows.none()
    if not user.is_superuser:
        rows = rows.filter(project__memberships__user=user)
    return rows.order_by("-created_at", "-pk")
