"""The one place that decides who may see and change a project.

A stranger (no role) gets 404, so project names do not leak; a member without the
right role gets 403."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from studio.accounts.models import Role
from studio.projects.models import Project


def project_for(user: object, slug: str, *, edit: bool = False) -> tuple[Project, Role]:
    project = Project.objects.filter(slug=slug).first()
    role = project.role_of(user) if project is not None else None
    if project is None or role is None:
        raise Http404("No such project")
    if edit and not role.can_edit:
        raise PermissionDenied(f"your role on {slug} is {role.value}; only authors can change it")
    return project, role


def visible_projects(user: object) -> list[Project]:
    qs = Project.objects.all()
    if not getattr(user, "is_superuser", False):
        qs = qs.filter(memberships__user=user)
    return list(qs.order_by("-updated_at"))
