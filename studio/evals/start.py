"""Starting an eval (plan it, write its rows, send one task per case once they are
committed) and cancelling one."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runtime import Case, Pack, select_cases
from studio import packs
from studio.deployments.models import Deployment
from studio.endpoints.backends import spec_for
from studio.endpoints.models import Endpoint
from studio.errors import Refused
from studio.evals import recordings, shared
from studio.evals.models import Eval, EvalCase
from studio.evals.settings import setting
from studio.evals.shared import S, finish_if_done
from studio.numbers import whole_number
from studio.projects.models import Project


class EvalRefused(Refused):
    """The eval cannot start; the message says why and what to do."""


@dataclass
class Plan:
    sha: str
    pack: Pack
    cases: list[Case]
    endpoints: list[Endpoint | None]
    tiers: list[Endpoint]  # the one eval's tier ladder, small to large; [] = no ladder


def _endpoint(ref: int | str | None) -> Endpoint | None:
    if ref is None or ref == "":
        return None
    found = None
    pk = whole_number(ref)
    if pk is not None:
        found = Endpoint.objects.filter(pk=pk).first()
    if found is None and isinstance(ref, str):
        found = Endpoint.objects.filter(name=ref).first()
    if found is None:
        raise EvalRefused(f"no endpoint {ref!r}; give an endpoint's id or name, or null for the pack's own model")
    return found


def plan_eval(
    project: Project,
    *,
    version: str | None,
    endpoints: Sequence[int | str | None],
    tags: Sequence[str] = (),
    repeats: int = 1,
    tiers: Sequence[int | str] = (),
    exclude_tags: Sequence[str] = (),
    untagged: bool = False,
) -> Plan:
    """Check everything that can be known before rows are written; EvalRefused if not.
    `tiers`: a tier ladder (endpoint ids or names, small to large) for one eval; the
    endpoints must then be left out (or be the ladder's first)."""
    if not 1 <= repeats <= 100:
        raise EvalRefused(f"repeats must be from 1 to 100, not {repeats}")
    ladder = _ladder(tiers)
    chosen: list[Endpoint | None] = []
    for ref in endpoints or [None]:
        endpoint = _endpoint(ref)
        if endpoint not in chosen:
            chosen.append(endpoint)
    if ladder:
        if chosen not in ([None], [ladder[0]]):
            raise EvalRefused("give either endpoints (one eval each) or tiers (one eval over the ladder), not both")
        chosen = [ladder[0]]
    try:
        with packs.loaded(project, version, own_model=None in chosen) as got:
            sha, pack = got.ensure_runnable().sha, got.pack
    except packs.PackUnrunnable as exc:
        raise EvalRefused(str(exc)) from None
    if not pack.cases:
        raise EvalRefused(f"the pack at {sha[:10]} has no evalset cases (evalset.jsonl)")
    wanted, unwanted = clean(tags), clean(exclude_tags)
    cases = select_cases(pack, set(wanted), exclude_tags=set(unwanted), untagged=untagged)
    if not cases:
        known = sorted({t for c in pack.cases for t in c.tags})
        asked = [f"tags {', '.join(wanted)}"] if wanted else []
        asked += ["untagged"] if untagged else []
        asked += [f"leaving out {', '.join(unwanted)}"] if unwanted else []
        raise EvalRefused(
            f"no case is selected ({'; '.join(asked)}); tags in this evalset: {', '.join(known) or '(none)'}"
        )
    total = len(cases) * repeats * len(chosen)
    if total > setting("PACKFORGE_EVAL_MAX_CASES"):
        raise EvalRefused(f"{total} case runs in one start; the limit is {setting('PACKFORGE_EVAL_MAX_CASES')}")
    return Plan(sha, pack, cases, chosen, ladder)


def clean(tags: Sequence[str]) -> list[str]:
    """Tags as given by a form or the API: stripped, empty ones dropped, sorted, once each."""
    return sorted({t.strip() for t in tags if t.strip()})


def _ladder(tiers: Sequence[int | str]) -> list[Endpoint]:
    if isinstance(tiers, str):
        raise EvalRefused("tiers must be a list of endpoint ids or names, small to large")
    ladder: list[Endpoint] = []
    for ref in tiers:
        endpoint = _endpoint(ref)
        if endpoint is None:
            raise EvalRefused("every tier must be an endpoint (id or name); the pack's own model is not a tier")
        if endpoint in ladder:
            raise EvalRefused(f"endpoint {endpoint.name!r} is twice in the tiers; each tier is a different endpoint")
        ladder.append(endpoint)
    return ladder


def start_eval(
    project: Project,
    *,
    user: User,
    version: str | None = None,
    endpoints: Sequence[int | str | None] = (None,),
    tags: Sequence[str] = (),
    repeats: int = 1,
    tiers: Sequence[int | str] = (),
    deployment: Deployment | None = None,
    record_tools: bool = False,
    replay_tools_from: Eval | int | None = None,
    exclude_tags: Sequence[str] = (),
    untagged: bool = False,
) -> list[Eval]:
    """Write one Eval per endpoint (one `batch`) and its case rows, and enqueue one task
    per case once the rows are committed. With `tiers` (endpoint ids or names, small to
    large): one Eval whose cases climb that ladder (docs/tiers.md). `deployment`: the
    deployment the eval is of (start_deployment_eval), for the record. `record_tools`:
    keep every tool call's result (the Eval's tape once it ends); `replay_tools_from`:
    a finished recording eval of this project whose tape answers every tool call, no
    tool called (docs/tools.md, "Recorded tool results")."""
    mode, source = _tools_mode(project, record_tools, replay_tools_from)
    plan = plan_eval(
        project,
        version=version,
        endpoints=endpoints,
        tags=tags,
        repeats=repeats,
        tiers=tiers,
        exclude_tags=exclude_tags,
        untagged=untagged,
    )
    batch = uuid.uuid4().hex[:12]
    made: list[Eval] = []
    case_ids: list[int] = []
    with transaction.atomic():
        for endpoint in plan.endpoints:
            ev = Eval.objects.create(
                project=project,
                version=plan.sha,
                endpoint=endpoint,
                tiers=[e.pk for e in plan.tiers],
                deployment=deployment,
                tools_mode=mode,
                tools_from=source,
                tape=source.tape if source is not None else "",
                model_spec=_model_spec(plan, endpoint),
                batch=batch,
                tags=clean(tags),
                exclude_tags=clean(exclude_tags),
                untagged=untagged,
                repeats=repeats,
                total=len(plan.cases) * repeats,
                created_by=user,
            )
            rows = EvalCase.objects.bulk_create(
                [EvalCase(eval=ev, case_id=c.id, repeat=r) for c in plan.cases for r in range(repeats)], batch_size=1000
            )
            case_ids.extend(row.pk for row in rows)
            made.append(ev)
        transaction.on_commit(lambda: shared.enqueue_cases(case_ids))
    return made


def _tools_mode(project: Project, record: bool, replay_from: Eval | int | None) -> tuple[str, Eval | None]:
    if replay_from is None:
        return (recordings.RECORD if record else ""), None
    if record:
        raise EvalRefused("record tool results or replay them, not both (a replay calls no tool)")
    try:
        return recordings.REPLAY, recordings.replay_source(project.pk, replay_from)
    except (recordings.RecordingRefused, ValueError) as exc:
        raise EvalRefused(str(exc)) from None


def _model_spec(plan: Plan, endpoint: Endpoint | None) -> str:
    if plan.tiers:
        return " > ".join(spec_for(e) for e in plan.tiers)[:500]
    return spec_for(endpoint) if endpoint is not None else (plan.pack.model or "")


def start_deployment_eval(
    deployment: Deployment,
    *,
    user: User,
    tags: Sequence[str] = (),
    repeats: int = 1,
    record_tools: bool = False,
    replay_tools_from: Eval | int | None = None,
    exclude_tags: Sequence[str] = (),
    untagged: bool = False,
) -> Eval:
    """Evaluate a deployment: its version over its tier ladder (a deployment without
    tiers runs on the pack's own model, as it serves)."""
    if not deployment.version:
        raise EvalRefused(f"deployment {deployment.name!r} has no version to evaluate")
    (ev,) = start_eval(
        deployment.project,
        user=user,
        version=deployment.version,
        tiers=list(deployment.tiers),
        tags=tags,
        exclude_tags=exclude_tags,
        untagged=untagged,
        repeats=repeats,
        deployment=deployment,
        record_tools=record_tools,
        replay_tools_from=replay_tools_from,
    )
    return ev


def cancel_eval(ev: Eval) -> bool:
    """Cancel an eval that has not ended: queued cases are cancelled now; running ones
    stop within a poll of their worker's watcher (their model calls are dropped).
    Returns False when the eval had already ended."""
    now = timezone.now()
    with transaction.atomic():
        if not Eval.objects.filter(pk=ev.pk, status__in=[Eval.Status.QUEUED, Eval.Status.RUNNING]).update(
            status=Eval.Status.CANCELLED
        ):
            return False
        EvalCase.objects.filter(eval_id=ev.pk, status=S.QUEUED).update(
            status=S.CANCELLED, finished_at=now, error="the eval was cancelled before this case started"
        )
        # Running cases with no live worker (lease lapsed, or re-sent and not claimed) will
        # never report back: close them here.
        EvalCase.objects.filter(eval_id=ev.pk, status=S.RUNNING).filter(
            Q(lease_until__lt=now) | Q(lease_owner="") | Q(lease_until__isnull=True)
        ).update(
            status=S.CANCELLED,
            finished_at=now,
            lease_owner="",
            lease_until=None,
            error="the eval was cancelled; this case's worker was gone",
        )
    ev.refresh_from_db(fields=["status"])
    finish_if_done(ev.pk)
    return True
