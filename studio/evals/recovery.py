"""Recovery: what keeps an eval's cases moving when workers die or stall.

- the **watcher** (one thread per worker process) renews the leases of the cases this
  process runs, and sets a case's cancel event when its eval is cancelled or its lease
  moved to another worker;
- the **sweep** (every PACKFORGE_WORK_SWEEP_S, from the watcher) re-sends the cases
  whose lease lapsed, re-sends queued cases when nothing anywhere has moved for
  PACKFORGE_WORK_STALL_S (a message lost with a killed worker), and ends evals whose
  cases are all final. A re-sent case goes back through the one claim in worker.py."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from studio.evals import shared
from studio.evals.models import Eval, EvalCase
from studio.evals.shared import S, finish_if_done
from studio.work.admission import kind_of, resend_stale_held
from studio.work.leases import lease, take_lapsed
from studio.work.settings import setting
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.evals")


class Watcher(LeaseWatcher):
    """One per worker process (studio.work.watcher): every PACKFORGE_WORK_POLL_S it sets
    the cancel event of cases whose eval was cancelled, renews the leases of the cases
    this process runs (every quarter lease), and sweeps (every PACKFORGE_WORK_SWEEP_S).
    One query per poll for the whole process, however many cases run in it. Unlike the
    other kinds it runs when tasks run inline too (tests drive it by hand)."""

    model = EvalCase
    name = "eval-watcher"

    def enabled(self) -> bool:
        return bool(setting("PACKFORGE_WORK_WATCH"))

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)

    def check(self, held: list[Held]) -> None:
        cancelled = set(
            Eval.objects.filter(pk__in={h.group for h in held}, status=Eval.Status.CANCELLED).values_list(
                "pk", flat=True
            )
        )
        for h in held:
            if h.group in cancelled:
                h.cancel.set()


_watcher = Watcher()


def watcher() -> Watcher:
    return _watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Recover what dead workers left behind; end evals whose cases are all final.

    - running cases whose lease lapsed are re-sent (each by exactly one sweeper: the
      conditional UPDATE that marks it re-sent); in a cancelled eval they are closed;
    - when this worker is idle and nothing anywhere has run or finished for
      PACKFORGE_WORK_STALL_S, queued cases are re-sent: their messages were lost (a
      killed worker had taken them off the queue). A duplicate message is harmless: its
      delivery claims nothing. One sweeper per eval per stall period (`swept_at`)."""
    now = timezone.now()
    lease_for = lease()
    stall = timedelta(seconds=setting("PACKFORGE_WORK_STALL_S"))
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
        for case_pk in take_lapsed(lapsed, lease_for):
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
    admitted = kind_of(EvalCase)  # registered by studio.evals.worker, which every worker imports
    if admitted is not None:
        resend_stale_held(admitted, stall)
    if resend:
        shared.enqueue_cases(resend)
    return {"resent": len(resend), "closed": closed, "ended": ended}
