"""Starting a compile (check the spec at the project's head, write the row, send the task
once it is committed), cancelling one, and adopting a pack it made (a commit of the pack
into the project's pack/): one of its attempts' packs, which run on the offline test
model, or the pack judged on its target model (adopt_files does both)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from studio.compiles import shared
from studio.compiles.models import Compile, CompileAttempt
from studio.compiles.scorers import spec_scorers
from studio.compiles.settings import setting
from studio.compiles.shared import S
from studio.endpoints.keys import key_env_problem
from studio.endpoints.models import Endpoint
from studio.errors import Refused
from studio.numbers import whole_number
from studio.packs import PACK_PREFIX, PackUnrunnable
from studio.projects.models import Project
from studio.projects.specs import check_spec, spec_files
from studio.projects.storage import PackRepo, StorageError
from studio.proposals import service as proposals
from studio.proposals.models import Proposal

# The planner endpoints a compile can use: a frontier model behind an OpenAI-compatible
# server, or a recorded planner (plan documents replayed from the server's disk, set up
# by staff like a scripted endpoint).
PLANNER_SCHEMES = ("openai:", "recorded:")


EVALSET = "evalset.jsonl"  # the project's one gold: an adoption leaves it as it is


class CompileRefused(Refused):
    """The compile (or the adoption) cannot happen; the message says why and what to do.
    A refused compile is a 400, a refused adoption a 409 (the adopt functions say so)."""


def endpoint_named(ref: int | str | None, what: str) -> Endpoint | None:
    """An endpoint by id or name; None for "" / None / "rules" (the planner) / "none"."""
    if ref is None or ref in ("", "rules", "none"):
        return None
    found = None
    pk = whole_number(ref)
    if pk is not None:
        found = Endpoint.objects.filter(pk=pk).first()
    if found is None and isinstance(ref, str):
        found = Endpoint.objects.filter(name=ref).first()
    if found is None:
        raise CompileRefused(f"no endpoint {ref!r} for the {what}; give an endpoint's id or name")
    return found


def planner_endpoints() -> list[Endpoint]:
    return [e for e in Endpoint.objects.all() if e.spec.strip().startswith(PLANNER_SCHEMES)]


def start_compile(
    project: Project,
    *,
    user: User,
    planner: Endpoint | None = None,
    target: Endpoint | None = None,
    attempts: int | None = None,
) -> Compile:
    """Check the spec at the project's head loads, save a queued Compile, and send its
    task once the row is committed. `planner` None: the model-free planner."""
    most = setting("PACKFORGE_COMPILE_MAX_ATTEMPTS")
    if attempts is not None and not 1 <= attempts <= most:
        raise CompileRefused(f"attempts must be from 1 to {most}, not {attempts}")
    if planner is not None and not planner.spec.strip().startswith(PLANNER_SCHEMES):
        raise CompileRefused(
            f"endpoint {planner.name!r} cannot plan: a planner endpoint is an openai: server (or a recorded planner)"
        )
    for endpoint in (planner, target):
        problem = key_env_problem(endpoint.key_env) if endpoint is not None else None
        if endpoint is not None and problem:
            raise CompileRefused(f"endpoint {endpoint.name!r}: {problem}")
    try:
        repo = PackRepo(project.repo_path)
        version = repo.resolve(None)
        files = spec_files(repo, version)
    except StorageError as exc:
        raise CompileRefused(str(exc)) from None
    if not files:
        raise CompileRefused("this project has no spec (spec/spec.yaml and spec/gold.jsonl); write one first")
    spec, problems = check_spec(files)
    if spec is None:
        shown = "; ".join(
            f"{p.file}:{p.line}: {p.message}" if p.line else f"{p.file}: {p.message}" for p in problems[:5]
        )
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise CompileRefused(f"the spec at {version[:10]} does not load: {shown}{more}")
    try:
        spec_scorers(spec)  # an output compared by a host scorer the studio does not have
    except PackUnrunnable as exc:
        raise CompileRefused(str(exc)) from None
    with transaction.atomic():
        made = Compile.objects.create(
            project=project,
            version=version,
            planner="endpoint" if planner is not None else "rules",
            planner_endpoint=planner,
            target_endpoint=target,
            max_attempts=attempts,
            created_by=user,
        )
        transaction.on_commit(lambda: shared.send([made.pk]))
    return made


def cancel_compile(c: Compile) -> bool:
    """Cancel a compile that has not ended: a queued one now; a running one stops within a
    poll of its worker's watcher (the loop's cancel Event; its planner call is dropped).
    Returns False when it had already ended."""
    now = timezone.now()
    with transaction.atomic():
        if Compile.objects.filter(pk=c.pk, status=S.QUEUED).update(
            status=S.CANCELLED, cancel_requested=True, finished_at=now, stage="cancelled", message="cancelled"
        ):
            c.refresh_from_db()
            return True
        if not Compile.objects.filter(pk=c.pk, status=S.RUNNING).update(cancel_requested=True):
            return False
        # A running compile with no live worker (lease lapsed, or re-sent and not yet
        # claimed) will never report back: close it here.
        Compile.objects.filter(pk=c.pk, status=S.RUNNING).filter(
            Q(lease_until__lt=now) | Q(lease_owner="") | Q(lease_until__isnull=True)
        ).update(
            status=S.CANCELLED,
            lease_owner="",
            lease_until=None,
            finished_at=now,
            stage="cancelled",
            message="cancelled; its worker was gone",
        )
    c.refresh_from_db()
    return True


def adoption_message(attempt: CompileAttempt) -> str:
    c = attempt.compile
    return (
        f"Adopt compile #{c.pk} attempt {attempt.number}: the pack compiled from spec version {c.version[:10]}\n\n"
        f"spec version: {c.version}\nplanner: {c.planner_label}"
    )


def judged_adoption_message(c: Compile) -> str:
    target = c.target_endpoint.name if c.target_endpoint is not None else "none"
    return (
        f"Adopt compile #{c.pk}'s judged pack: the pack compiled from spec version {c.version[:10]}, "
        f"judged on the target\n\n"
        f"spec version: {c.version}\nplanner: {c.planner_label}\ntarget endpoint: {target}\n"
        f"model: {c.judged_model}\narm: {c.judged_arm}\nverdict: {c.judged_sentence}"
    )


def adopt_attempt(attempt: CompileAttempt, *, user: User, base: str | None = None) -> Proposal:
    """Adopt the attempt's pack (adopt_files), with a message naming the spec version and
    the attempt. Its pack runs on the offline test model (structure tests only)."""
    if not attempt.pack_files:
        raise CompileRefused(f"attempt {attempt.number} produced no pack to adopt", status=409)
    what = f"attempt {attempt.number}'s pack"
    return adopt_files(
        attempt.compile.project, attempt.pack_files, what, adoption_message(attempt), user=user, base=base
    )


def adopt_judged(c: Compile, *, user: User, base: str | None = None) -> Proposal:
    """Adopt the pack judged on the compile's target (adopt_files): the one whose
    manifest's model is the target, with a message naming the spec version, the target
    and the verdict."""
    if not c.judged_pack_files:
        raise CompileRefused(
            f"compile #{c.pk} has no judged pack to adopt: "
            + (c.judged_sentence or "it was not judged on a target model"),
            status=409,
        )
    return adopt_files(
        c.project, c.judged_pack_files, "the judged pack", judged_adoption_message(c), user=user, base=base
    )


def adopt_files(
    project: Project, files: dict[str, str], what: str, message: str, *, user: User, base: str | None = None
) -> Proposal:
    """Open a proposal (docs/proposals.md) whose one commit makes the project's pack/
    exactly `files` (path -> text; files it does not have are removed), with `message`,
    except the evalset: one gold per project, so the project's evalset.jsonl stays as it
    is and an adoption never drops or rewrites a case. `what` names the pack in the
    refusals.

    `base` is the version the author saw the pack's diff against (the page sends it); the
    proposal starts there, and a teammate's newer save on main meets it at merge time
    (a merge commit, or a conflict shown as a diff), never overwritten unseen. Without
    `base`, it starts at main's tip."""
    repo = PackRepo(project.repo_path)
    try:
        head = repo.resolve(base)
        current = repo.files(head, prefix=PACK_PREFIX)
    except StorageError as exc:
        raise CompileRefused(f"cannot adopt on version {base or 'main'}: {exc}", status=409) from None
    wanted = {f"{PACK_PREFIX}{path}": text.encode("utf-8") for path, text in files.items() if path != EVALSET}
    kept = {f"{PACK_PREFIX}{EVALSET}"}
    changes: dict[str, bytes | None] = {
        p: None for p in (f"{PACK_PREFIX}{q}" for q in current) if p not in wanted and p not in kept
    }
    changes.update({p: data for p, data in wanted.items() if current.get(p[len(PACK_PREFIX) :]) != data})
    if not changes:
        raise CompileRefused(f"the project's pack is already {what}; nothing to adopt", status=409)
    try:
        return proposals.open_proposal(
            project,
            user=user,
            title=message.splitlines()[0][:200],
            description=message,
            changes=changes,
            base=head,
            source=Proposal.Source.COMPILE,
            message=message,
        )
    except Refused as exc:
        raise CompileRefused(f"could not open a proposal with the pack: {exc}", status=409) from None
