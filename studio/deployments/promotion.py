"""Moving a deployment between versions of main (docs/proposals.md): promote to a version
on main, roll back to a version it served before, and follow main on merge for the
deployments that opted in. Each move is one DeploymentChange with who and why."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Q

from studio.deployments.models import Deployment, DeploymentChange
from studio.deployments.service import Refused, change_deployment, resolve_version
from studio.projects.models import Project

MAX_NOTE = 2000


def _note(note: str) -> str:
    if "\x00" in note:
        raise Refused("the note holds a NUL character")
    if len(note) > MAX_NOTE:
        raise Refused(f"the note is {len(note)} characters; at most {MAX_NOTE}")
    return note


def _one(made: list[DeploymentChange], deployment: Deployment, sha: str) -> DeploymentChange:
    if not made:  # another request moved it there first
        raise Refused(f"{deployment.name} already serves {sha[:10]}")
    return made[0]


def promote(deployment: Deployment, version: str | None, *, user: User, note: str = "") -> DeploymentChange:
    """Serve `version` (main's tip when None), which must be on main."""
    note = _note(note)
    sha = resolve_version(deployment.project, version)
    if sha == deployment.version:
        raise Refused(f"{deployment.name} already serves {sha[:10]}")
    return _one(change_deployment(deployment, user=user, version=sha, note=note), deployment, sha)


def promoted_versions(deployment: Deployment) -> list[str]:
    """Every version the deployment has served, newest first, once each."""
    seen: list[str] = []
    rows = DeploymentChange.objects.filter(deployment=deployment).filter(
        Q(field__in=("version", "rollback")) | Q(field="created")
    )
    for change in rows.order_by("-at", "-pk"):
        new = change.new.get("version") if change.field == "created" and isinstance(change.new, dict) else change.new
        if isinstance(new, str) and new not in seen:
            seen.append(new)
    return seen


def rollback(deployment: Deployment, to: str | None, *, user: User, note: str = "") -> DeploymentChange:
    """Serve a version the deployment served before: `to` (a sha or a prefix of one), or
    the one before the current when None."""
    note = _note(note)
    earlier = [v for v in promoted_versions(deployment) if v != deployment.version]
    if not earlier:
        raise Refused(f"{deployment.name} has served no other version; there is nothing to roll back to")
    if to is None:
        target = earlier[0]
    else:
        matches = [v for v in earlier if v.startswith(to.strip().lower())] if len(to.strip()) >= 4 else []
        if len(matches) != 1:
            shown = ", ".join(v[:10] for v in earlier[:5])
            raise Refused(f"{to!r} is not one version {deployment.name} served before; it served {shown}")
        target = matches[0]
    return _one(change_deployment(deployment, user=user, version=target, note=note, rollback=True), deployment, target)


def follow_main(project: Project, sha: str, *, user: User, note: str) -> list[str]:
    """Promote every deployment of `project` that follows main to `sha`. A deployment that
    cannot take it (its pack does not load there) stays where it is; the answer says why,
    one sentence each, and the others still move."""
    refused = []
    for deployment in Deployment.objects.filter(project=project, follow_main=True).exclude(version=sha):
        try:
            promote(deployment, sha, user=user, note=note)
        except Refused as exc:
            refused.append(f"{deployment.name} not promoted: {exc}")
    return refused
