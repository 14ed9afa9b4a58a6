"""Running one case of an eval, in a worker: claim it, run it (or resume its run), write
its one outcome. How a case stays correct when workers die or stall (docs/evals.md has
the full story):

- **Claim** (studio.work.delivery, the template every leased row runs through). A
  delivery claims its case with one conditional UPDATE: a queued case, or a
  running one whose lease lapsed (its worker is gone) or that a sweep re-sent. The claim
  bumps `attempts` and writes a fresh lease token; a delivery that claims nothing (the
  case is final, or another worker holds a live lease) returns at once. A case claimed
  more than PACKFORGE_EVAL_MAX_ATTEMPTS times is closed as an error, with the reason.
- **Lease.** The process's watcher (recovery.py) renews the leases of the cases this
  process runs, and sets a case's cancel event when its eval is cancelled (or its lease
  moved to another worker): the walker stops, and the openai backend drops its call.
- **Resume.** The case's run checkpoints into the database (OutcomeStore). A case
  whose run exists resumes from it (runtime.resume_run): finished nodes are replayed, a
  tool result journaled before the kill is reused, never called again. Taking a run over
  bumps its fencing token, so a stalled worker that wakes up gets FencedOut on its next
  write and drops the case without touching the row.
- **One outcome.** The run's final checkpoint status and the case's outcome are written
  in one transaction, guarded by the lease token (`OutcomeStore`): either both are
  there or neither, so a kill between them resumes the run (which then only replays)
  instead of leaving a finished run without a row, or a row counted twice."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from runtime import (
    Backend,
    BadSpec,
    Case,
    Pack,
    Registry,
    RunResult,
    RunStateError,
    RunTape,
    Tier,
    ToolTape,
    open_backend,
    resume_run,
    run_pack,
    score_case,
)
from studio import host_tools, packs
from studio.endpoints.models import Endpoint
from studio.evals import recordings
from studio.evals.models import Eval, EvalCase
from studio.evals.recovery import watcher
from studio.evals.results.cases import output_of
from studio.evals.settings import setting
from studio.evals.shared import S, enqueue_cases, finish_if_done
from studio.kept import Kept
from studio.packs import PackUnrunnable
from studio.redaction import stored
from studio.work import admission, caps, leases
from studio.work.checkpoints import OutcomeStore
from studio.work.delivery import Delivery
from studio.work.leases import LeaseLost
from studio.work.slots import capped_endpoint, endpoint_tiers
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.evals")


@dataclass
class Runner:
    """What every case of one eval needs, opened once per worker process."""

    pack: Pack
    cases: dict[str, Case]
    backend: Backend
    tools: Registry | None
    tiers: list[Tier] | None = None  # the eval's tier ladder (backend is tier 0's); None: no ladder
    replaying: ToolTape | None = None  # the tool recording a replaying eval answers from

    def close(self) -> None:
        for backend in [t.backend for t in self.tiers] if self.tiers else [self.backend]:
            backend.close()


_RUNNERS_KEPT = 8
_runners: Kept[tuple[int, float], Runner] = Kept(lambda: _RUNNERS_KEPT)


def open_model(ev: Eval, pack: Pack) -> Backend:
    """The eval's model. An endpoint's calls each hold a slot of its global cap
    (studio.work.slots); the pack's own model is not capped."""
    if ev.endpoint_id is None:
        return open_backend(ev.model_spec or pack.model or "", base_dir=pack.root, default=pack.model)
    endpoint = ev.endpoint
    assert endpoint is not None
    return capped_endpoint(endpoint, base_dir=pack.root, default=pack.model)


def open_tiers(ev: Eval, pack: Pack) -> list[Tier]:
    """The eval's tier ladder: one Tier per endpoint of `ev.tiers`, in order, each behind
    its endpoint's global cap (studio.work.slots.endpoint_tiers, as served runs)."""
    found = {e.pk: e for e in Endpoint.objects.filter(pk__in=ev.tiers)}
    missing = [pk for pk in ev.tiers if pk not in found]
    if missing:
        raise PackUnrunnable([f"the eval's tier endpoint {missing[0]} was deleted"])
    return endpoint_tiers([found[pk] for pk in ev.tiers], base_dir=pack.root, default=pack.model)


def open_runner(ev: Eval) -> Runner:
    got = packs.load_folder(packs.version_folder(ev.project, ev.version), ev.version, own_model=False).ensure_runnable()
    cases = {c.id: c for c in got.pack.cases}
    replaying = recordings.replay_tape(ev)
    if ev.tiers:
        tiers = open_tiers(ev, got.pack)
        return Runner(got.pack, cases, tiers[0].backend, got.tools, tiers, replaying)
    return Runner(got.pack, cases, open_model(ev, got.pack), got.tools, None, replaying)


def runner_for(ev: Eval) -> Runner:
    key = (ev.pk, ev.created_at.timestamp())
    with _runners.lock:
        runner = _runners.get(key)
        if runner is None:
            runner = open_runner(ev)
            for old in _runners.put(key, runner):
                old.close()
        return runner


def forget_runners() -> None:
    """Close and drop this process's opened evals (tests; a worker keeps them)."""
    with _runners.lock:
        for runner in _runners.drain():
            runner.close()
        packs.forget_folders()
        host_tools.forget()


def _close(case_pk: int, token: str, status: str, error: str, **fields: Any) -> bool:
    """Write a final status, if this delivery still holds the case's lease."""
    return leases.close(EvalCase, case_pk, token, status=status, error=error, finished_at=timezone.now(), **fields)


class CaseDelivery(Delivery[EvalCase]):
    """One delivery of one case run (studio.work.delivery); see the module's docstring."""

    model = EvalCase
    noun = "eval case"
    max_claims_setting = "PACKFORGE_EVAL_MAX_ATTEMPTS"
    failed = S.ERROR
    stamps_start = True
    admitted = admission.register(
        admission.Kind(EvalCase, user="eval__created_by", project="eval__project", resend=enqueue_cases)
    )

    def load(self) -> EvalCase:
        return EvalCase.objects.select_related("eval__project", "eval__endpoint").get(pk=self.pk)

    def watcher(self) -> LeaseWatcher:
        return watcher()

    def group(self, row: EvalCase) -> int | None:
        return row.eval_id

    def max_claims(self) -> int:
        return int(setting("PACKFORGE_EVAL_MAX_ATTEMPTS"))

    def before(self, row: EvalCase) -> tuple[bool, str | None]:
        if row.eval.status != Eval.Status.CANCELLED:
            return False, None
        return True, (S.CANCELLED if _close(self.pk, self.token, S.CANCELLED, "the eval was cancelled") else None)

    def end(self, row: EvalCase, status: str, error: str) -> bool:
        return _close(self.pk, self.token, status, error)

    def refusal(self, exc: Exception) -> str | None:
        return str(exc) if isinstance(exc, PackUnrunnable | BadSpec) else None

    def settle(self, row: EvalCase, exc: Exception, message: str) -> str | None:
        return super().settle(row, exc, stored(message))

    def settled(self, row: EvalCase, status: str) -> None:
        finish_if_done(row.eval_id)

    def run(self, row: EvalCase, held: Held) -> str | None:
        ev, case, token = row.eval, row, self.token
        if ev.status == Eval.Status.QUEUED:
            Eval.objects.filter(pk=ev.pk, status=Eval.Status.QUEUED).update(status=Eval.Status.RUNNING)
        runner = runner_for(ev)
        gold = runner.cases.get(case.case_id)
        if gold is None:
            missing = f"case {case.case_id!r} is not in the evalset at {ev.version[:10]}"
            return S.ERROR if _close(case.pk, token, S.ERROR, missing) else None
        store = OutcomeStore()
        hook = recordings.hook_for(ev, runner.replaying)
        # The first claim of a case cannot find a checkpoint: only a claim can begin one.
        result = _walk(runner, gold, case.run_id, store, held.cancel, maybe_begun=case.attempts > 1, tape=hook)
        if held.lost:
            raise LeaseLost(case.run_id)
        fields = outcome_fields(runner.pack, gold, result, store)
        fields.update(stored(recordings.case_fields(ev, hook, result)))
        if fields.get("diverged") and fields["status"] != S.CANCELLED:
            # its outcome needed a tool call the recording does not have: not scored
            fields.update(status=S.DIVERGED, blamed="", error="; ".join(fields["diverged"])[:2000])
        with transaction.atomic():
            store.commit_final()
            if not EvalCase.objects.filter(pk=case.pk, lease_owner=token, status=S.RUNNING).update(**fields):
                raise LeaseLost(case.run_id)  # rolls the checkpoint's final status back too
        return str(fields["status"])


def run_eval_case(case_pk: int) -> str | None:
    """Run one case run to its outcome; return the status written, or None when this
    delivery had nothing to do (the case is final, another worker holds it, or it was
    taken over while this one ran). Safe to call any number of times for one case."""
    return CaseDelivery(case_pk).deliver()


def _walk(
    runner: Runner,
    gold: Case,
    run_id: str,
    store: OutcomeStore,
    cancel: threading.Event,
    maybe_begun: bool = True,
    tape: RunTape | None = None,
) -> RunResult:
    common: dict[str, Any] = {
        "backend": runner.backend,
        "tools": runner.tools,
        "store": store,
        "answers": gold.human,
        "cancel": cancel,
        "tiers": runner.tiers,
        "options": caps.run_options(runner.pack, tape=tape),
    }
    if maybe_begun and store.exists(run_id):
        return resume_run(runner.pack, run_id, **common)
    try:
        return run_pack(runner.pack, gold.input, run_id=run_id, case_id=gold.id, **common)
    except RunStateError:  # begun by a delivery that lost its lease before this one claimed
        return resume_run(runner.pack, run_id, **common)


def outcome_fields(pack: Pack, gold: Case, result: RunResult, store: OutcomeStore) -> dict[str, Any]:
    """The EvalCase columns for a finished run (runtime.case_scoring.score_case)."""
    trace = result.trace
    fields: dict[str, Any] = {
        "run_status": result.status,
        "finished_at": timezone.now(),
        "lease_owner": "",
        "lease_until": None,
        # Rejected generations are kept for the drill-down; pages show them to authors only.
        "trace": trace.to_dict(include_rejected_text=True),
    }
    fields["output"] = output_of(fields["trace"], pack)
    totals = trace.totals()
    fields.update(
        generations=int(totals["generations"]),
        model_calls=int(totals["model_calls"]),
        prompt_tokens=int(totals["prompt_tokens"]),
        cached_tokens=int(totals.get("cached_tokens", 0)),
        completion_tokens=int(totals["completion_tokens"]),
        reasoning_tokens=int(totals["reasoning_tokens"]),
        latency_s=float(totals["latency_s"]),
        cost_usd=float(totals["cost_usd"]),
        path=trace.path,
        tier=trace.tier,
        settled_by=trace.settled_by or "",
        edges=[s.edge.index for s in trace.steps if s.edge is not None],
    )
    if result.status == "cancelled":
        fields.update(status=S.CANCELLED, error="the eval was cancelled while this case ran")
        return stored(fields)  # studio.redaction: no key reaches the database
    scored = score_case(pack, gold, result)
    fields.update(
        tier=scored.tier,
        blamed=scored.blamed or "",
        path=scored.path,
        edges=scored.edges,
        diffs=[
            {
                "field": d.field,
                "expected": d.expected,
                "actual": d.actual,
                "missing": d.missing,
                **({"score": d.score, "reason": d.reason} if d.score is not None else {}),
            }
            for d in scored.diffs
        ],
        problems=[p.to_dict() for p in scored.problems],
        rejections=scored.rejections,
        error=trace.error or "",
        status=S.PASSED if scored.passed else S.FAILED,
    )
    if any(p.kind == "scorer" for p in scored.problems):
        # The host's scorer failed on this case: an error of the eval, not a verdict on the pack.
        fields.update(status=S.ERROR, error="; ".join(p.message for p in scored.problems if p.kind == "scorer"))
    pending = store.pending[3] if store.pending else None
    if result.status == "failed" and (pending or {}).get("error_kind") == "backend":
        # The model could not be reached: no outcome for the pack, an error of the run.
        fields["status"] = S.ERROR
    return stored(fields)
