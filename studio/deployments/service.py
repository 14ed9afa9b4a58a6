"""What the API, the pages and the review queue do to deployments and served runs:
create and change a deployment (each change of its version, tiers or webhook written to
its history), submit a run (idempotent on the client's run_id), cancel one, and resume
one that waits for a person (`resume_served_run`, exactly once) or end it
(`reject_served_run`)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from studio import errors, packs
from studio.deployments import events, settled
from studio.deployments.models import Deployment, DeploymentChange, ServedRun
from studio.endpoints.models import Endpoint
from studio.projects.branches import on_main
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.work import leases

S = ServedRun.Status
RUN_ID = re.compile(r"(?!\.+$)[A-Za-z0-9._:-]{1,64}")  # not "." or "..": a URL path would fold them


class Refused(errors.Refused):
    """The request cannot be done; the message says why (a 400)."""


class Conflict(errors.Conflict):
    """The run_id is taken by a run with another input (a 409)."""


# -- deployments ------------------------------------------------------------------------


def resolve_version(project: Project, version: str | None) -> str:
    """The full commit sha `version` names (None: main's tip); it must be on main (a merged
    proposal or a commit there: docs/proposals.md) and the pack at it must load."""
    try:
        with packs.loaded(project, version, own_model=False) as got:
            sha = got.sha
    except packs.PackUnrunnable as exc:
        raise Refused(str(exc)) from None
    if not on_main(PackRepo(project.repo_path), sha):
        raise Refused(
            f"version {sha[:10]} is not on main; a deployment serves only versions on main (merge its proposal first)"
        )
    return sha


def check_tiers(tiers: list[Any]) -> list[int]:
    """Endpoint ids, in order, each an existing endpoint, none twice."""
    if not isinstance(tiers, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tiers):
        raise Refused("tiers must be a list of endpoint ids, smallest model first")
    if len(set(tiers)) != len(tiers):
        raise Refused("an endpoint may be one tier only")
    found = set(Endpoint.objects.filter(pk__in=tiers).values_list("pk", flat=True))
    missing = [t for t in tiers if t not in found]
    if missing:
        raise Refused(f"no endpoint with id {missing[0]}")
    return list(tiers)


def tier_names(deployment: Deployment) -> list[str]:
    names = dict(Endpoint.objects.filter(pk__in=deployment.tiers).values_list("pk", "name"))
    return [names.get(pk, f"endpoint {pk} (deleted)") for pk in deployment.tiers]


def _validate(deployment: Deployment) -> None:
    try:
        deployment.full_clean()
    except ValidationError as exc:
        problems = [f"{field}: {m}" for field, ms in exc.message_dict.items() for m in ms]
        raise Refused("; ".join(problems)) from None


def create_deployment(
    project: Project,
    *,
    user: User,
    name: str,
    version: str | None,
    tiers: list[Any],
    webhook_url: str = "",
    webhook_secret: str = "",
) -> Deployment:
    deployment = Deployment(
        project=project,
        name=name,
        version=resolve_version(project, version),
        tiers=check_tiers(tiers),
        webhook_url=webhook_url,
        webhook_secret=webhook_secret,
        created_by=user,
    )
    _validate(deployment)
    with transaction.atomic():
        try:
            with transaction.atomic():
                deployment.save()
        except IntegrityError:
            raise Refused(f"the name {name!r} is taken by another deployment") from None
        DeploymentChange.objects.create(
            deployment=deployment,
            user=user,
            field="created",
            old=None,
            new={"version": deployment.version, "tiers": deployment.tiers},
        )
    return deployment


def change_deployment(
    deployment: Deployment, *, user: User, note: str = "", rollback: bool = False, **changes: Any
) -> list[DeploymentChange]:
    """Apply `changes` (version, tiers, webhook_url, webhook_secret, follow_main; None:
    unchanged) and write one DeploymentChange per field that changed, `note` (why) on
    each. A new version is a promote (history field `version`), or with `rollback` a
    rollback (field `rollback`); either way it must be on main (resolve_version). A
    secret's history says that it changed, never what it is."""
    if changes.get("version") is not None:
        changes["version"] = resolve_version(deployment.project, changes["version"])
    if changes.get("tiers") is not None:
        changes["tiers"] = check_tiers(changes["tiers"])
    made: list[DeploymentChange] = []
    with transaction.atomic():
        row = Deployment.objects.select_for_update().get(pk=deployment.pk)
        for field in ("version", "tiers", "webhook_url", "webhook_secret", "follow_main"):
            new = changes.get(field)
            if new is None or getattr(row, field) == new:
                continue
            old = getattr(row, field)
            setattr(row, field, new)
            shown_old, shown_new = (bool(old), bool(new)) if field == "webhook_secret" else (old, new)
            recorded = "rollback" if field == "version" and rollback else field
            made.append(
                DeploymentChange(
                    deployment=row, user=user, field=recorded, old=shown_old, new=shown_new, note=note[:2000]
                )
            )
        if made:
            row.updated_at = timezone.now()
            _validate(row)
            row.save()
            DeploymentChange.objects.bulk_create(made)
    deployment.refresh_from_db()
    return made


# -- runs -------------------------------------------------------------------------------


def input_digest(value: dict[str, Any]) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class Submitted:
    run: ServedRun
    created: bool  # False: the run_id was known and its input the same
    held_by: str = ""  # the lease token of a run created held by the caller (walk_here)


def submit(
    deployment: Deployment, input: Any, *, run_id: str | None, user: User | None, walk_here: bool = False
) -> Submitted:
    """Queue a run of `input` on `deployment` (the task is sent when the transaction
    commits), or find the run `run_id` already names: with the same input it is the
    same run (created False); with another, Conflict. With `walk_here` a new run is
    created already claimed by the caller, who walks it (execute.walk_here; its lease
    token is `held_by`) and sends no task: a caller that dies leaves a lease that lapses,
    and a worker's sweep sends the run on, as after a worker's death."""
    if not isinstance(input, dict):
        raise Refused('the input must be a JSON object, e.g. {"ticket": "..."}')
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise Refused("run_id must be 1-64 letters, digits or . _ : - characters")
    digest = input_digest(input)
    rid = run_id or uuid.uuid4().hex
    token = leases.new_token() if walk_here else ""
    from studio.deployments.recovery import send_on_commit

    held = {**leases.held_from_start(token, leases.lease()), "started_at": timezone.now()} if token else {}
    try:
        with transaction.atomic():
            run = ServedRun.objects.create(
                deployment=deployment,
                run_id=rid,
                input=input,
                input_digest=digest,
                version=deployment.version,
                submitted_by=user,
                **held,
            )
            if not token:
                send_on_commit(run.pk)
    except IntegrityError:
        existing = ServedRun.objects.filter(deployment=deployment, run_id=rid).first()
        if existing is None:  # lost a race with a delete: try once more
            raise Refused(f"run {rid!r} could not be saved; send it again") from None
        if existing.input_digest != digest:
            raise Conflict(
                f"run {rid!r} exists on {deployment.name} with another input; a run_id names one input"
            ) from None
        return Submitted(existing, created=False)
    return Submitted(run, created=True, held_by=token)


def cancel(run: ServedRun) -> bool:
    """Ask for `run` to stop: a queued or waiting run ends cancelled now; a running one is
    stopped by its worker (its in-flight model call dropped) at the next poll. False when
    it had already ended."""
    if run.is_final:
        return False
    ServedRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    now = timezone.now()
    ended = ServedRun.objects.filter(pk=run.pk, status__in=[S.QUEUED, S.WAITING]).update(
        status=S.CANCELLED, error="cancelled", finished_at=now, lease_owner="", lease_until=None
    )
    if ended:
        events.record(run.pk, "run.end", {"status": S.CANCELLED, "error": "cancelled"})
        settled.announce(run.pk)
        from studio.deployments.webhooks import send_on_end

        send_on_end(run.pk)
    return True


def resume_served_run(run: ServedRun | int, node: str, answer: dict[str, Any], user: User) -> bool:
    """A person's answer for a run waiting at `node`: store it and queue the resume task,
    which commits it (verified by the runtime against the node's schema and assert, with
    provenance `human:<username>`) and walks the run on. Exactly once: a conditional
    UPDATE from `waiting` at `node` is the guard, so a second decision (a reviewer racing
    another) returns False and changes nothing. The caller checks the answer first
    (runtime.check_answer with `run.state`); one the runtime still refuses puts the run
    back to waiting with the reasons in `error`."""
    pk = run.pk if isinstance(run, ServedRun) else int(run)
    by = f"human:{user.get_username()}"
    with transaction.atomic():
        won = ServedRun.objects.filter(pk=pk, status=S.WAITING, waiting_at=node).update(
            status=S.QUEUED, answer=answer, answer_node=node, answered_by=by, error="", attempts=0
        )
        if not won:
            return False
        events.record(pk, "review.decided", {"node": node, "decision": "answer", "by": by, "answer": answer})
        from studio.deployments.recovery import send_on_commit

        send_on_commit(pk)
    return True


def reject_served_run(run: ServedRun | int, node: str, note: str, user: User) -> bool:
    """A person's rejection of a run waiting at `node`: the run ends `failed` with the
    note as its error. Exactly once, by the same guard as resume_served_run."""
    pk = run.pk if isinstance(run, ServedRun) else int(run)
    by = f"human:{user.get_username()}"
    with transaction.atomic():
        won = ServedRun.objects.filter(pk=pk, status=S.WAITING, waiting_at=node).update(
            status=S.FAILED,
            error=f"rejected by {by} at {node}: {note}",
            finished_at=timezone.now(),
            answered_by=by,
            tier="person",  # a person ended it (its tier was left empty while it waited)
        )
        if not won:
            return False
        events.record(pk, "review.decided", {"node": node, "decision": "reject", "by": by, "note": note})
        events.record(pk, "run.end", {"status": S.FAILED, "error": f"rejected at {node}: {note}"})
        settled.announce(pk)
        from studio.deployments.webhooks import send_on_end

        send_on_end(pk)
    return True
