"""Who may do what with deployments and their runs (the rules of studio.accounts.access):
any member of the project reads a deployment and its runs; authors create and change
deployments, submit and cancel runs, make deployment tokens. A stranger gets 404 (names
do not leak), a member without the role 403. A deployment-scoped API token reaches only
its deployment's runs (studio.accounts.auth refuses it elsewhere with 403); it acts as
the author who made it, so it stops working when that author loses the role."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from studio.accounts.models import Role
from studio.deployments.models import Deployment, ServedRun


def deployment_for(user: User, name: str, *, edit: bool = False) -> tuple[Deployment, Role]:
    if "\x00" in name:
        raise Http404("No such deployment")
    deployment = Deployment.objects.select_related("project", "created_by").filter(name=name).first()
    if deployment is None:
        raise Http404("No such deployment")
    role = deployment.project.role_of(user)
    if role is None:
        raise Http404("No such deployment")
    if edit and not role.can_edit:
        raise PermissionDenied(f"your role on {deployment.project.slug} is {role.value}; only authors can do this")
    return deployment, role


def served_run_for(deployment: Deployment, run_id: str) -> ServedRun:
    run = ServedRun.objects.filter(deployment=deployment, run_id=run_id).first()
    if run is None:
        raise Http404("No such run")
    return run
