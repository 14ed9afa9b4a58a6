"""What the cross-project eval list shows: every eval of the projects the user is a member of (a superuser: of every project), newest first."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import OuterRef, QuerySet, Subquery

from studio.evals.models import Eval

__all__ = ["last_evals", "visible_evals"]


def visible_evals(user: User | AnonymousUser) -> QuerySet[Eval]:
    rows = Eval.objects.all()
    if not isinstance(user, User):
        return rows.none()
    if not user.is_superuser:
        rows = rows.filter(project__memberships__user=user)
    return rows.order_by("-created_at", "-pk")


def last_evals(project_ids: list[int]) -> dict[int, Eval]:
    """Each project's newest finished eval (done), by project id; one query for them all
    (the projects list shows its pass rate)."""
    newest = (
        Eval.objects.filter(project_id=OuterRef("project_id"), status=Eval.Status.DONE)
        .order_by("-finished_at", "-pk")
        .values("pk")[:1]
    )
    rows = Eval.objects.filter(project_id__in=project_ids, status=Eval.Status.DONE).filter(pk=Subquery(newest))
    return {ev.project_id: ev for ev in rows.only("pk", "project_id", "summary", "finished_at", "version")}
