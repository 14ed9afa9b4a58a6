"""The studio's calls into the runtime for evals: start one, run one case of it in a
worker, end it, cancel it, gate it against the baseline.

An eval is one Eval row per endpoint and one EvalCase row per (case, repeat); each case
row is one Celery task (`studio.evals.tasks.execute_eval_case`). How a case stays
correct when workers die or stall (docs/evals.md has the full story):

- **Claim.** A delivery claims its case with one conditional UPDATE: a queued case, or a
  running one whose lease lapsed (its worker is gone) or that a sweep re-sent. The claim
  bumps `attempts` and writes a fresh lease token; a delivery that claims nothing (the
  case is final, or another worker holds a live lease) returns at once. A case claimed
  more than PACKFORGE_EVAL_MAX_ATTEMPTS times is closed as an error, with the reason.
- **Lease.** A per-process watcher thread renews the leases of the cases this process
  runs, and sets a case's cancel event when its eval is cancelled (or its lease moved
  to another worker): the walker stops, and the openai backend drops its call.
- **Resume.** The case's run checkpoints into the database (DatabaseStore). A case whose
  run exists resumes from it (runtime.resume_run): finished nodes are replayed, a tool
  result journaled before the kill is reused, never called again. Taking a run over
  bumps its fencing token, so a stalled worker that wakes up gets FencedOut on its next
  write and drops the case without touching the row.
- **One outcome.** The run's final checkpoint status and the case's outcome are written
  in one transaction, guarded by the lease token (`EvalCaseStore`): either both are
  there or neither, so a kill between them resumes the run (which then only replays)
  instead of leaving a finished run without a row, or a row counted twice.
- **Sweep.** Every worker sweeps now and then: it re-sends the cases whose lease lapsed,
  re-sends queued cases when nothing anywhere has moved for PACKFORGE_EVAL_STALL_S (a
  message lost with a killed worker), and ends evals whose cases are all final."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, transaction
from django.db.models import Count, DateTimeField, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from runtime import (
    BadSpec,
    FencedOut,
    PackInvalid,
    RunNotFound,
    RunStateError,
    load_pack,
    open_backend,
    resume_run,
    run_pack,
)
from runtime.backends.base import Backend
from runtime.checkpoint import Entry, RunRecord
from runtime.evaluate import DEFAULT_TOLERANCES, SCHEMA_CATEGORIES, check_baseline, score_case
from runtime.pack import Pack
from runtime.pack.model import Case
from runtime.walker import RunResult
from studio import host_tools
from studio.endpoints.models import Endpoint
from studio.evals.models import Eval, EvalCase, JournalEntry, RunCheckpoint
from studio.evals.store import DatabaseStore
from studio.host_tools import registry_broken, tool_registry, tools_problem
from studio.projects.execute import PACK_PREFIX, materialize, own_model_problem
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError

log = logging.getLogger("packforge.studio.evals")

S = EvalCase.Status
OPEN = (S.QUEUED, S.RUNNING)

# -- settings -------------------------------------------------------------------------------

DEFAULTS: dict[str, Any] = {
    "PACKFORGE_EVAL_MAX_ATTEMPTS": 3,  # claims of one case before it is closed as an error
    "PACKFORGE_EVAL_LEASE_S": 30.0,  # a case's lease; renewed every quarter of it
    "PACKFORGE_EVAL_POLL_S": 0.5,  # how often a worker looks for cancelled evals
    "PACKFORGE_EVAL_SWEEP_S": 5.0,  # how often a worker sweeps for lost cases
    "PACKFORGE_EVAL_STALL_S": 60.0,  # nothing moved this long: re-send queued cases
    "PACKFORGE_EVAL_QUEUE": "",  # the Celery queue of eval tasks ("" = the default queue)
    "PACKFORGE_EVAL_MAX_CASES": 100_000,  # cases x repeats x endpoints in one start
    "PACKFORGE_EVAL_WATCH": True,  # run the watcher thread (tests drive it by hand)
    "PACKFORGE_SLOT_TTL_S": 30.0,  # a Redis model slot's lease; renewed every quarter
}


def setting(name: str) -> Any:
    """A setting of this app: from settings.py when it defines it, else the environment
    variable of the same name, else the default above. Bad values raise
    ImproperlyConfigured naming the variable."""
    default = DEFAULTS[name]
    value = getattr(settings, name, None)
    if value is None:
        raw = os.environ.get(name, "")
        if raw == "":
            return default
        value = raw
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                    raise ValueError("expected true or false")
                return low in ("1", "true", "yes", "on")
            return bool(value)
        if isinstance(default, int):
            number = int(value)
            if number < 1:
                raise ValueError("must be at least 1")
            return number
        if isinstance(default, float):
            seconds = float(value)
            if not seconds > 0:
                raise ValueError("must be more than 0")
            return seconds
        return str(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r}: {exc}") from None


# -- starting an eval ---------------------------------------------------------------------------


class EvalRefused(Exception):
    """The eval cannot start; the message says why and what to do."""


@dataclass
class Plan:
    sha: str
    pack: Pack
    cases: list[Case]
    endpoints: list[Endpoint | None]


def _load(files: dict[str, bytes], root: Path, tools: dict[str, Callable[..., Any]] | None, sha: str) -> Pack:
    try:
        return load_pack(materialize(files, root), tools=set(tools) if tools is not None else None)
    except PackInvalid as exc:
        shown = "; ".join(str(issue) for issue in exc.issues[:3])
        more = f" (and {len(exc.issues) - 3} more)" if len(exc.issues) > 3 else ""
        raise EvalRefused(f"the pack at {sha[:10]} does not load: {shown}{more}") from None


def _endpoint(ref: int | str | None) -> Endpoint | None:
    if ref is None or ref == "":
        return None
    found = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        found = Endpoint.objects.filter(pk=int(ref)).first()
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
) -> Plan:
    """Check everything that can be known before rows are written; EvalRefused if not."""
    if not 1 <= repeats <= 100:
        raise EvalRefused(f"repeats must be from 1 to 100, not {repeats}")
    chosen: list[Endpoint | None] = []
    for ref in endpoints or [None]:
        endpoint = _endpoint(ref)
        if endpoint not in chosen:
            chosen.append(endpoint)
    try:
        repo = PackRepo(project.repo_path)
        sha = repo.resolve(version or None)
        files = repo.files(sha, prefix=PACK_PREFIX)
    except StorageError as exc:
        raise EvalRefused(str(exc)) from None
    try:
        tools = tool_registry()
    except BadSpec as exc:
        raise EvalRefused(registry_broken(exc)) from None
    with tempfile.TemporaryDirectory(prefix="pf-eval-plan-") as tmp:
        pack = _load(files, Path(tmp), tools, sha)
    if (problem := tools_problem(pack, tools)) is not None:
        raise EvalRefused(problem)
    if None in chosen and not pack.model:
        raise EvalRefused("this pack's manifest names no model; choose an endpoint")
    if None in chosen and (problem := own_model_problem(pack)) is not None:
        raise EvalRefused(problem)
    if not pack.cases:
        raise EvalRefused(f"the pack at {sha[:10]} has no evalset cases (evalset.jsonl)")
    wanted = {t.strip() for t in tags if t.strip()}
    cases = [c for c in pack.cases if not wanted or wanted & set(c.tags)]
    if not cases:
        known = sorted({t for c in pack.cases for t in c.tags})
        raise EvalRefused(
            f"no case has any of the tags {', '.join(sorted(wanted))}; "
            f"tags in this evalset: {', '.join(known) or '(none)'}"
        )
    total = len(cases) * repeats * len(chosen)
    if total > setting("PACKFORGE_EVAL_MAX_CASES"):
        raise EvalRefused(f"{total} case runs in one start; the limit is {setting('PACKFORGE_EVAL_MAX_CASES')}")
    return Plan(sha, pack, cases, chosen)


def start_eval(
    project: Project,
    *,
    user: object,
    version: str | None = None,
    endpoints: Sequence[int | str | None] = (None,),
    tags: Sequence[str] = (),
    repeats: int = 1,
) -> list[Eval]:
    """Write one Eval per endpoint (one `batch`) and its case rows, and enqueue one task
    per case once the rows are committed."""
    from studio.endpoints.execute import spec_for

    plan = plan_eval(project, version=version, endpoints=endpoints, tags=tags, repeats=repeats)
    batch = uuid.uuid4().hex[:12]
    made: list[Eval] = []
    case_ids: list[int] = []
    clean_tags = sorted({t.strip() for t in tags if t.strip()})
    with transaction.atomic():
        for endpoint in plan.endpoints:
            ev = Eval.objects.create(
                project=project,
                version=plan.sha,
                endpoint=endpoint,
                model_spec=spec_for(endpoint) if endpoint is not None else (plan.pack.model or ""),
                batch=batch,
                tags=clean_tags,
                repeats=repeats,
                total=len(plan.cases) * repeats,
                created_by=user,
            )
            rows = EvalCase.objects.bulk_create(
                [EvalCase(eval=ev, case_id=c.id, repeat=r) for c in plan.cases for r in range(repeats)], batch_size=1000
            )
            case_ids.extend(row.pk for row in rows)
            made.append(ev)
        transaction.on_commit(partial(_enqueue, case_ids))
    return made


def _enqueue(case_ids: Iterable[int]) -> None:
    from studio.evals.tasks import enqueue_cases

    enqueue_cases(list(case_ids))


# -- running one case (in a worker) -------------------------------------------------------------


class LeaseLost(Exception):
    """The case's lease passed to another delivery while this one ran."""


class EvalCaseStore(DatabaseStore):
    """The database checkpoint store for one case's run, with two changes:

    - the run's final status is held back until the case's outcome is written, in the
      same transaction (`commit_final`): both are there, or neither;
    - a journal write is two statements: an UPDATE of the run row that matches only
      while this writer's fence is current (the fence check, and the row's write lock
      until commit), then the INSERT, at the next sequence number this writer keeps
      (it is the run's only writer while its fence is current; the unique (run, seq)
      constraint backs that up). DatabaseStore's SELECT FOR UPDATE + MAX(seq) + INSERT
      was half the time of a scripted case (benchmarks/eval_scale.py)."""

    FINAL = frozenset({"done", "failed", "cancelled", "waiting"})

    def __init__(self) -> None:
        self.pending: tuple[str, int, str, dict[str, Any] | None] | None = None
        self._seq: dict[str, int] = {}

    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        fence = super().begin(run_id, pack=pack, digest=digest, input=input, case_id=case_id)
        self._seq[run_id] = 0
        return fence

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        fence, record, entries = super().take_over(run_id)
        self._seq[run_id] = entries[-1].seq if entries else 0
        return fence, record, entries

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        seq = self._seq.get(run_id)
        if seq is None:  # not begun or taken over through this store: the general path
            super().append(run_id, fence, kind, node, step, payload)
            return
        with transaction.atomic():
            self._fenced_update(run_id, fence, updated_at=timezone.now())
            JournalEntry.objects.create(run_id=run_id, seq=seq + 1, kind=kind, node=node, step=step, payload=payload)
        self._seq[run_id] = seq + 1

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None:
        if status in self.FINAL:
            self.pending = (run_id, fence, status, result)
            return
        self._fenced_update(run_id, fence, status=status, result=result, updated_at=timezone.now())

    def commit_final(self) -> None:
        if self.pending is not None:
            run_id, fence, status, result = self.pending
            self._fenced_update(run_id, fence, status=status, result=result, updated_at=timezone.now())

    @staticmethod
    def _fenced_update(run_id: str, fence: int, **fields: Any) -> None:
        if not RunCheckpoint.objects.filter(run_id=run_id, fence=fence).update(**fields):
            current = RunCheckpoint.objects.filter(run_id=run_id).values_list("fence", flat=True).first()
            if current is None:
                raise RunNotFound(f"no run '{run_id}'")
            raise FencedOut(f"run '{run_id}' was taken over (fence {current}, this writer has {fence})")


@dataclass
class Runner:
    """What every case of one eval needs, opened once per worker process."""

    pack: Pack
    cases: dict[str, Case]
    backend: Backend
    tools: dict[str, Callable[..., Any]] | None


_cache_lock = threading.RLock()  # guards the runner and pack-folder caches
_runners: OrderedDict[tuple[int, float], Runner] = OrderedDict()
_pack_dirs: dict[tuple[int, str], Path] = {}
_pack_root: list[Path] = []
_RUNNERS_KEPT = 8


def _pack_dir(project: Project, sha: str) -> Path:
    """The pack at `sha`, written once per process into a folder kept until exit (a
    scripted model's file is read from there)."""
    key = (project.pk, sha)
    if key not in _pack_dirs:
        if not _pack_root:
            root = Path(tempfile.mkdtemp(prefix="pf-eval-packs-"))
            atexit.register(shutil.rmtree, root, True)
            _pack_root.append(root)
        folder = _pack_root[0] / f"{project.pk}-{sha}"
        files = PackRepo(project.repo_path).files(sha, prefix=PACK_PREFIX)
        shutil.rmtree(folder, ignore_errors=True)
        materialize(files, folder)
        _pack_dirs[key] = folder
    return _pack_dirs[key]


def open_model(ev: Eval, pack: Pack) -> Backend:
    """The eval's model. An endpoint's calls each hold a slot of its global cap
    (studio.evals.limits); the pack's own model is not capped."""
    if ev.endpoint_id is None:
        return open_backend(ev.model_spec or pack.model or "", base_dir=pack.root, default=pack.model)
    from studio.endpoints.execute import open_endpoint
    from studio.evals.limits import CappedBackend, slots

    endpoint = ev.endpoint
    assert endpoint is not None
    inner = open_endpoint(endpoint, base_dir=pack.root, default=pack.model)
    return CappedBackend(inner, slots(), f"endpoint-{endpoint.pk}", endpoint.concurrency)


def open_runner(ev: Eval) -> Runner:
    tools = tool_registry()
    try:
        pack = load_pack(_pack_dir(ev.project, ev.version), tools=set(tools) if tools is not None else None)
    except PackInvalid as exc:
        raise EvalRefused(f"the pack at {ev.version[:10]} does not load: {exc}") from None
    return Runner(pack, {c.id: c for c in pack.cases}, open_model(ev, pack), tools)


def runner_for(ev: Eval) -> Runner:
    key = (ev.pk, ev.created_at.timestamp())
    with _cache_lock:
        runner = _runners.get(key)
        if runner is None:
            runner = open_runner(ev)
            _runners[key] = runner
            while len(_runners) > _RUNNERS_KEPT:
                _, old = _runners.popitem(last=False)
                old.backend.close()
        else:
            _runners.move_to_end(key)
        return runner


def forget_runners() -> None:
    """Close and drop this process's opened evals (tests; a worker keeps them)."""
    with _cache_lock:
        for runner in _runners.values():
            runner.backend.close()
        _runners.clear()
        _pack_dirs.clear()
        host_tools.forget()


def _claimable(now: Any) -> Q:
    return (
        Q(status=S.QUEUED)
        | Q(status=S.RUNNING, lease_until__lt=now)
        | Q(status=S.RUNNING, lease_owner="")
        | Q(status=S.RUNNING, lease_until__isnull=True)
    )


def _lease() -> timedelta:
    return timedelta(seconds=setting("PACKFORGE_EVAL_LEASE_S"))


def _close(case_pk: int, token: str, status: str, error: str, **fields: Any) -> bool:
    """Write a final status, if this delivery still holds the case's lease."""
    return bool(
        EvalCase.objects.filter(pk=case_pk, lease_owner=token, status=S.RUNNING).update(
            status=status, error=error, finished_at=timezone.now(), lease_owner="", lease_until=None, **fields
        )
    )


def run_eval_case(case_pk: int) -> str | None:
    """Run one case run to its outcome; return the status written, or None when this
    delivery had nothing to do (the case is final, another worker holds it, or it was
    taken over while this one ran). Safe to call any number of times for one case."""
    token = uuid.uuid4().hex
    now = timezone.now()
    claimed = EvalCase.objects.filter(_claimable(now), pk=case_pk).update(
        status=S.RUNNING,
        attempts=F("attempts") + 1,
        lease_owner=token,
        lease_until=now + _lease(),
        started_at=Coalesce(F("started_at"), Value(now, output_field=DateTimeField())),
    )
    if not claimed:
        return None
    case = EvalCase.objects.select_related("eval__project", "eval__endpoint").get(pk=case_pk)
    ev = case.eval
    limit = setting("PACKFORGE_EVAL_MAX_ATTEMPTS")
    if ev.status == Eval.Status.CANCELLED:
        outcome: str | None = S.CANCELLED if _close(case_pk, token, S.CANCELLED, "the eval was cancelled") else None
    elif case.attempts > limit:
        reason = (
            f"killed its worker {case.attempts - 1} times: {case.attempts - 1} deliveries started this case "
            f"and none finished it (PACKFORGE_EVAL_MAX_ATTEMPTS={limit}); not tried again"
        )
        log.warning("eval case %s (%s): %s", case_pk, case.run_id, reason)
        outcome = S.ERROR if _close(case_pk, token, S.ERROR, reason) else None
    else:
        if ev.status == Eval.Status.QUEUED:
            Eval.objects.filter(pk=ev.pk, status=Eval.Status.QUEUED).update(status=Eval.Status.RUNNING)
        outcome = _run_claimed(case, ev, token)
    if outcome is not None:
        finish_if_done(ev.pk)
    return outcome


def _run_claimed(case: EvalCase, ev: Eval, token: str) -> str | None:
    active = watcher().register(case.pk, ev.pk, token)
    try:
        runner = runner_for(ev)
        gold = runner.cases.get(case.case_id)
        if gold is None:
            return (
                S.ERROR
                if _close(case.pk, token, S.ERROR, f"case {case.case_id!r} is not in the evalset at {ev.version[:10]}")
                else None
            )
        store = EvalCaseStore()
        # The first claim of a case cannot find a checkpoint: only a claim can begin one.
        result = _walk(runner, gold, case.run_id, store, active.cancel, maybe_begun=case.attempts > 1)
        if active.lost:
            raise LeaseLost(case.run_id)
        fields = outcome_fields(runner.pack, gold, result, store)
        with transaction.atomic():
            store.commit_final()
            if not EvalCase.objects.filter(pk=case.pk, lease_owner=token, status=S.RUNNING).update(**fields):
                raise LeaseLost(case.run_id)  # rolls the checkpoint's final status back too
        return str(fields["status"])
    except (FencedOut, LeaseLost) as exc:
        # Another delivery owns the case now (this worker stalled past its lease): its
        # outcome is the one that counts, so this one writes nothing.
        log.warning(
            "eval case %s (%s) was taken over by another worker; dropping this delivery: %s", case.pk, case.run_id, exc
        )
        return None
    except (OperationalError, InterfaceError):  # the database is away: the task retries the delivery
        _release(case.pk, token)
        raise
    except Exception as exc:  # the row must end final whatever happened; the log has the rest
        log.exception("eval case %s (%s) crashed", case.pk, case.run_id)
        kind = "" if isinstance(exc, EvalRefused | BadSpec) else f"internal error: {type(exc).__name__}: "
        return S.ERROR if _close(case.pk, token, S.ERROR, f"{kind}{exc}") else None
    finally:
        watcher().unregister(case.pk)


def _release(case_pk: int, token: str) -> None:
    """Give the lease up (best effort) so that a retried delivery may claim the case."""
    try:
        EvalCase.objects.filter(pk=case_pk, lease_owner=token).update(lease_owner="")
    except DatabaseError:
        pass


def _walk(
    runner: Runner, gold: Case, run_id: str, store: EvalCaseStore, cancel: threading.Event, maybe_begun: bool = True
) -> RunResult:
    common: dict[str, Any] = {
        "backend": runner.backend,
        "tools": runner.tools,
        "store": store,
        "answers": gold.human,
        "cancel": cancel,
    }
    if maybe_begun and store.exists(run_id):
        return resume_run(runner.pack, run_id, **common)
    try:
        return run_pack(runner.pack, gold.input, run_id=run_id, case_id=gold.id, **common)
    except RunStateError:  # begun by a delivery that lost its lease before this one claimed
        return resume_run(runner.pack, run_id, **common)


def outcome_fields(pack: Pack, gold: Case, result: RunResult, store: EvalCaseStore) -> dict[str, Any]:
    """The EvalCase columns for a finished run (runtime.evaluate.score_case)."""
    trace = result.trace
    fields: dict[str, Any] = {
        "run_status": result.status,
        "finished_at": timezone.now(),
        "lease_owner": "",
        "lease_until": None,
        # Rejected generations are kept for the drill-down; pages show them to authors only.
        "trace": trace.to_dict(include_rejected_text=True),
    }
    totals = trace.totals()
    fields.update(
        generations=int(totals["generations"]),
        model_calls=int(totals["model_calls"]),
        prompt_tokens=int(totals["prompt_tokens"]),
        completion_tokens=int(totals["completion_tokens"]),
        reasoning_tokens=int(totals["reasoning_tokens"]),
        latency_s=float(totals["latency_s"]),
        cost_usd=float(totals["cost_usd"]),
        path=trace.path,
        tier=trace.tier,
        edges=[s.edge.index for s in trace.steps if s.edge is not None],
    )
    if result.status == "cancelled":
        fields.update(status=S.CANCELLED, error="the eval was cancelled while this case ran")
        return fields
    scored = score_case(pack, gold, result)
    fields.update(
        tier=scored.tier,
        blamed=scored.blamed or "",
        path=scored.path,
        edges=scored.edges,
        diffs=[
            {"field": d.field, "expected": d.expected, "actual": d.actual, "missing": d.missing} for d in scored.diffs
        ],
        problems=[p.to_dict() for p in scored.problems],
        rejections=scored.rejections,
        error=trace.error or "",
        status=S.PASSED if scored.passed else S.FAILED,
    )
    pending = store.pending[3] if store.pending else None
    if result.status == "failed" and (pending or {}).get("error_kind") == "backend":
        # The model could not be reached: no outcome for the pack, an error of the run.
        fields["status"] = S.ERROR
    return fields


# -- ending, cancelling, counting ---------------------------------------------------------------


def finish_if_done(eval_pk: int) -> bool:
    if EvalCase.objects.filter(eval_id=eval_pk, status__in=OPEN).exists():
        return False
    return finalize_eval(eval_pk)


def finalize_eval(eval_pk: int) -> bool:
    """End an eval whose cases are all final: compute its summary, mark it done (or, for
    a cancelled eval, set when it finished). Returns whether this call ended it."""
    ev = Eval.objects.filter(pk=eval_pk).first()
    if ev is None or ev.status == Eval.Status.DONE or ev.finished_at is not None:
        return False
    if EvalCase.objects.filter(eval_id=eval_pk, status__in=OPEN).exists():
        return False
    summary = summary_of(ev)
    now = timezone.now()
    if ev.status == Eval.Status.CANCELLED:
        ended = Eval.objects.filter(pk=eval_pk, status=Eval.Status.CANCELLED, finished_at__isnull=True).update(
            summary=summary, finished_at=now
        )
    else:
        ended = Eval.objects.filter(pk=eval_pk, status__in=[Eval.Status.QUEUED, Eval.Status.RUNNING]).update(
            status=Eval.Status.DONE, summary=summary, finished_at=now
        )
    return bool(ended)


def summary_of(ev: Eval) -> dict[str, Any]:
    """studio.evals.results.summarize(eval) and its per-node totals (kept here, so the
    blame page does not read every trace again), over the basic counts and metrics;
    only those when the results module is missing or fails."""
    base: dict[str, Any] = {"counts": counts_of(ev), "metrics": metrics_of(ev)}
    try:
        from studio.evals import results
    except ImportError:
        return base
    try:
        summary = {**base, **results.summarize(ev)}
        if hasattr(results, "node_stats"):
            summary["node_stats"] = results.node_stats(ev)
        return summary
    except Exception as exc:
        log.exception("summarize(eval %s) failed; storing the basic counts only", ev.pk)
        return {**base, "summary_error": f"{type(exc).__name__}: {exc}"}


def counts_of(ev: Eval | int) -> dict[str, int]:
    """Case runs per status, plus `escalated` (final cases in the escalated tier, also
    counted under passed/failed) and `finished`. One aggregate query."""
    pk = ev if isinstance(ev, int) else ev.pk
    by = {status.value: Count("pk", filter=Q(status=status)) for status in S}
    got = EvalCase.objects.filter(eval_id=pk).aggregate(
        **by, escalated=Count("pk", filter=Q(tier="escalated", status__in=[S.PASSED, S.FAILED])), total=Count("pk")
    )
    counts = {k: int(v or 0) for k, v in got.items()}
    counts["finished"] = counts["total"] - counts[S.QUEUED] - counts[S.RUNNING]
    return counts


def metrics_of(ev: Eval) -> dict[str, float]:
    """The numbers the baseline gate compares, from the case rows (the same names and
    meanings as runtime.evaluate.EvalReport.metrics): studio.evals.results.metrics_of,
    or the same computed here when that module is missing. Cancelled cases are left
    out; a case that ended in error counts as not passed."""
    try:
        from studio.evals.results import metrics_of as results_metrics
    except ImportError:
        pass
    else:
        return results_metrics(ev)
    rows = EvalCase.objects.filter(eval_id=ev.pk, status__in=[S.PASSED, S.FAILED, S.ERROR])
    got = rows.aggregate(
        n=Count("pk"),
        passed=Count("pk", filter=Q(status=S.PASSED)),
        escalated=Count("pk", filter=Q(tier="escalated")),
        generations=Sum("generations"),
        calls=Sum("model_calls"),
        cost=Sum("cost_usd"),
    )
    n = got["n"] or 0
    generations = got["generations"] or 0
    violations = 0
    for rejections in rows.exclude(rejections={}).values_list("rejections", flat=True).iterator(chunk_size=2000):
        violations += sum(int(v) for k, v in (rejections or {}).items() if k in SCHEMA_CATEGORIES)
    per = max(n, 1)
    return {
        "pass_rate": (got["passed"] or 0) / per,
        "escalation_rate": (got["escalated"] or 0) / per,
        "schema_violation_rate": violations / generations if generations else 0.0,
        "mean_model_calls": (got["calls"] or 0) / per,
        "cost_per_case": float(got["cost"] or 0.0) / per,
    }


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


def mark_baseline(ev: Eval) -> None:
    """Make `ev` its project's baseline (one per project)."""
    with transaction.atomic():
        Eval.objects.filter(project_id=ev.project_id, is_baseline=True).exclude(pk=ev.pk).update(is_baseline=False)
        Eval.objects.filter(pk=ev.pk).update(is_baseline=True)
    ev.is_baseline = True


class _Metrics:
    """What runtime.evaluate.check_baseline reads of a report: its metrics."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def metrics(self) -> dict[str, float]:
        return self.values


def gate(ev: Eval) -> dict[str, Any]:
    """Does `ev` pass its project's baseline? One row per metric, by the runtime's
    check_baseline and default tolerances (runtime.evaluate.DEFAULT_TOLERANCES), as the
    summary page shows it (studio.evals.results.gate). An eval with no earlier baseline
    to regress against passes, and says so."""
    current = metrics_of(ev)
    if ev.is_baseline:
        return {
            "passes": True,
            "baseline": ev.pk,
            "metrics": current,
            "rows": [],
            "detail": "this eval is the project's baseline",
        }
    try:
        from studio.evals import results
    except ImportError:
        baseline = Eval.objects.filter(project_id=ev.project_id, is_baseline=True, created_at__lt=ev.created_at).first()
        rows = None
    else:
        baseline = results.baseline_for(ev)
        rows = results.gate(ev, baseline) if baseline is not None else None
    if baseline is None:
        return {
            "passes": True,
            "baseline": None,
            "metrics": current,
            "rows": [],
            "detail": "the project has no earlier baseline eval; mark one with POST /api/evals/{id}/baseline",
        }
    if rows is None:
        document = {"metrics": metrics_of(baseline), "tolerances": dict(DEFAULT_TOLERANCES)}
        rows = check_baseline(current, document)
    failing = [r["metric"] for r in rows if not r["ok"]]
    detail = (
        f"regressed against eval {baseline.pk}: {', '.join(failing)}"
        if failing
        else f"within tolerance of baseline eval {baseline.pk}"
    )
    return {"passes": not failing, "baseline": baseline.pk, "metrics": current, "rows": rows, "detail": detail}


# -- the watcher and the sweep ------------------------------------------------------------------


@dataclass
class Active:
    case_pk: int
    eval_pk: int
    token: str
    cancel: threading.Event = field(default_factory=threading.Event)
    lost: bool = False


class Watcher:
    """One per worker process: a thread that, every PACKFORGE_EVAL_POLL_S, sets the cancel
    event of cases whose eval was cancelled, renews the leases of the cases this process
    runs (every quarter lease), and sweeps (every PACKFORGE_EVAL_SWEEP_S). One query per
    poll for the whole process, however many cases run in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[int, Active] = {}
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._renewed = 0.0
        self._swept = 0.0

    def register(self, case_pk: int, eval_pk: int, token: str) -> Active:
        active = Active(case_pk, eval_pk, token)
        with self._lock:
            self._active[case_pk] = active
        self.start()
        return active

    def unregister(self, case_pk: int) -> None:
        with self._lock:
            self._active.pop(case_pk, None)

    def snapshot(self) -> list[Active]:
        with self._lock:
            return list(self._active.values())

    def start(self) -> None:
        if not setting("PACKFORGE_EVAL_WATCH"):
            return
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._pid, self._thread, self._active = os.getpid(), None, {}
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._forever, name="eval-watcher", daemon=True)
                self._thread.start()

    def _forever(self) -> None:
        while True:
            try:
                close_old_connections()
                self.tick()
            except Exception:  # the database away for a moment: the next poll tries again
                log.exception("eval watcher: this round failed")
            time.sleep(setting("PACKFORGE_EVAL_POLL_S"))

    def tick(self, *, sweep_now: bool = False) -> None:
        active = self.snapshot()
        mono = time.monotonic()
        if active:
            cancelled = set(
                Eval.objects.filter(pk__in={a.eval_pk for a in active}, status=Eval.Status.CANCELLED).values_list(
                    "pk", flat=True
                )
            )
            for a in active:
                if a.eval_pk in cancelled:
                    a.cancel.set()
            if mono - self._renewed >= setting("PACKFORGE_EVAL_LEASE_S") / 4:
                self._renewed = mono
                self.renew(active)
        if sweep_now or mono - self._swept >= setting("PACKFORGE_EVAL_SWEEP_S"):
            self._swept = mono
            sweep(idle=not active)

    def renew(self, active: list[Active]) -> None:
        EvalCase.objects.filter(lease_owner__in=[a.token for a in active], status=S.RUNNING).update(
            lease_until=timezone.now() + _lease()
        )
        owners = dict(EvalCase.objects.filter(pk__in=[a.case_pk for a in active]).values_list("pk", "lease_owner"))
        for a in active:
            if owners.get(a.case_pk) != a.token and a.case_pk in self._active:
                # Taken over (this process stalled past its lease) or closed by a cancel:
                # stop the walk; the fence refuses any write it still tries.
                a.lost = True
                a.cancel.set()


_watcher = Watcher()


def watcher() -> Watcher:
    return _watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Recover what dead workers left behind; end evals whose cases are all final.

    - running cases whose lease lapsed are re-sent (each by exactly one sweeper: the
      conditional UPDATE that marks it re-sent); in a cancelled eval they are closed;
    - when this worker is idle and nothing anywhere has run or finished for
      PACKFORGE_EVAL_STALL_S, queued cases are re-sent: their messages were lost (a
      killed worker had taken them off the queue). A duplicate message is harmless: its
      delivery claims nothing. One sweeper per eval per stall period (`swept_at`)."""
    now = timezone.now()
    lease = _lease()
    stall = timedelta(seconds=setting("PACKFORGE_EVAL_STALL_S"))
    open_evals = list(
        Eval.objects.filter(
            Q(status__in=[Eval.Status.QUEUED, Eval.Status.RUNNING])
            | Q(status=Eval.Status.CANCELLED, finished_at__isnull=True),
        ).values_list("pk", "status", "created_at")
    )
    resend: list[int] = []
    closed = 0
    for pk, status, _created in open_evals:
        lapsed = EvalCase.objects.filter(eval_id=pk, status=S.RUNNING, lease_until__lt=now)
        if status == Eval.Status.CANCELLED:
            closed += lapsed.update(
                status=S.CANCELLED,
                finished_at=now,
                lease_owner="",
                lease_until=None,
                error="the eval was cancelled; this case's worker was gone",
            )
            continue
        for case_pk, owner, until in lapsed.values_list("pk", "lease_owner", "lease_until")[:1000]:
            if EvalCase.objects.filter(pk=case_pk, status=S.RUNNING, lease_owner=owner, lease_until=until).update(
                lease_owner="", lease_until=now + lease
            ):
                log.warning("eval case %s lost its worker (lease lapsed); sending it again", case_pk)
                resend.append(case_pk)
    ids = [pk for pk, _, _ in open_evals]
    if idle and ids:
        live = (
            EvalCase.objects.filter(eval_id__in=ids, status=S.RUNNING, lease_until__gte=now)
            .exclude(lease_owner="")
            .exists()
        )
        moved = EvalCase.objects.filter(eval_id__in=ids, finished_at__gte=now - stall).exists()
        if not live and not moved:
            for pk, status, created in open_evals:
                if status == Eval.Status.CANCELLED or created > now - stall:
                    continue
                if (
                    Eval.objects.filter(pk=pk)
                    .filter(Q(swept_at__isnull=True) | Q(swept_at__lt=now - stall))
                    .update(swept_at=now)
                ):
                    queued = list(EvalCase.objects.filter(eval_id=pk, status=S.QUEUED).values_list("pk", flat=True))
                    if queued:
                        log.warning(
                            "eval %s: nothing moved for %s; sending its %d queued cases again", pk, stall, len(queued)
                        )
                        resend.extend(queued)
    ended = sum(1 for pk in ids if finish_if_done(pk))
    if resend:
        _enqueue(resend)
    return {"resent": len(resend), "closed": closed, "ended": ended}
