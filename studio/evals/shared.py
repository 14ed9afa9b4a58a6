"""What every eval job shares (starting, running a case, recovering): the case
statuses, sending case tasks, and ending an eval whose cases are all final
(the app's settings are settings.py, below this one). Below start.py, worker.py and recovery.py; imports none of them, nor tasks.py.

The job modules (docs/evals.md has the full story):
- start.py: plan an eval, write its rows, send one task per case; cancel one;
- worker.py: claim a case, run it, write its one outcome (OutcomeStore);
- recovery.py: the per-process watcher (leases, cancels) and the sweep;
- results/: the metrics, the summary and the baseline gate."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from studio.evals import recordings
from studio.evals.models import Eval, EvalCase
from studio.evals.results.nodes import node_stats
from studio.evals.results.summary import compute_tiers_by_model, metrics_of, summarize
from studio.evals.settings import setting
from studio.work import sweep as sweeping

log = logging.getLogger("packforge.studio.evals")

S = EvalCase.Status
OPEN = (S.QUEUED, S.RUNNING)
CASE_TASK = "evals.execute_eval_case"  # studio.evals.tasks.execute_eval_case


def enqueue_cases(case_ids: Iterable[int]) -> None:
    """Send one `evals.execute_eval_case` per id, by the task's name (this module is below
    tasks.py; studio.work.sweep.send). Callers send after commit (start_eval uses
    transaction.on_commit), so a worker never sees an uncommitted row."""
    sweeping.send(CASE_TASK, case_ids, setting("PACKFORGE_EVAL_QUEUE") or None)


# -- ending an eval ---------------------------------------------------------------------------


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
    ended_with: dict[str, Any] = {}
    if ev.tools_mode == recordings.RECORD:  # the recording: every case's calls, one tape
        ev.tape = ended_with["tape"] = recordings.tape_of(ev)
    summary = summary_of(ev)
    now = timezone.now()
    if ev.status == Eval.Status.CANCELLED:
        ended = Eval.objects.filter(pk=eval_pk, status=Eval.Status.CANCELLED, finished_at__isnull=True).update(
            summary=summary, finished_at=now, **ended_with
        )
    else:
        ended = Eval.objects.filter(pk=eval_pk, status__in=[Eval.Status.QUEUED, Eval.Status.RUNNING]).update(
            status=Eval.Status.DONE, summary=summary, finished_at=now, **ended_with
        )
    return bool(ended)


def summary_of(ev: Eval) -> dict[str, Any]:
    """studio.evals.results.summary.summarize(eval) and its per-node totals (kept here, so the
    blame page does not read every trace again), over the basic counts and metrics;
    only those when summarizing fails."""
    base: dict[str, Any] = {"counts": counts_of(ev), "metrics": metrics_of(ev)}
    try:
        return {
            **base,
            **summarize(ev),
            "node_stats": node_stats(ev),
            "tiers_by_model": compute_tiers_by_model(ev),
            "tools": recordings.tools_summary(ev),
        }
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
