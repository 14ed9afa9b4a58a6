"""Recovery of try-it runs: what keeps a run moving when its worker dies, the same
story as eval cases (studio.leases; docs/studio.md, "Try-it runs survive a crash").

- the **watcher** (one thread per worker process, studio.leases.LeaseWatcher) renews
  the leases of the runs this process walks, and stops a walk whose lease moved to
  another delivery;
- the **sweep** (every PACKFORGE_EVAL_SWEEP_S, from the watcher) re-sends each running
  run whose lease lapsed (its worker is gone; exactly one sweeper wins each), and, when
  this process is idle, each run still queued PACKFORGE_EVAL_STALL_S after it was
  created or last re-sent (its message was lost). A duplicate message is harmless: its
  delivery claims nothing. Re-sent runs go back through the one claim in execute.py,
  which resumes them from their database checkpoint."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from studio.celery import app
from studio.evals.settings import setting
from studio.leases import QUEUED, RUNNING, take_lapsed
from studio.runs.models import TryRun
from studio.watching import StudioWatcher

log = logging.getLogger("packforge.studio.runs")

RUN_TASK = "runs.execute_try_run"  # studio.runs.tasks.execute_try_run


def lease() -> timedelta:
    return timedelta(seconds=setting("PACKFORGE_EVAL_LEASE_S"))


def send(run_ids: list[int]) -> None:
    """Send `runs.execute_try_run` for each id, by name (tasks.py imports this module),
    to PACKFORGE_RUN_QUEUE ("" = the default queue)."""
    queue = setting("PACKFORGE_RUN_QUEUE") or None
    with app.producer_or_acquire() as producer:
        for run_id in run_ids:
            app.signature(RUN_TASK, args=(run_id,)).apply_async(queue=queue, producer=producer)


class RunWatcher(StudioWatcher):
    model = TryRun
    name = "run-watcher"

    def lease_for(self) -> timedelta:
        return lease()

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


_watcher = RunWatcher()


def watcher() -> RunWatcher:
    return _watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Re-send the runs dead workers or lost messages left behind; how many."""
    resend = take_lapsed(TryRun.objects.all(), lease())
    for run_id in resend:
        log.warning("try run %s lost its worker (lease lapsed); sending it again", run_id)
    lost = 0
    now = timezone.now()
    cutoff = now - timedelta(seconds=setting("PACKFORGE_EVAL_STALL_S"))
    # A queued run is only lost when nothing moves: while some run holds a live lease or
    # one finished within the stall period, queued runs are waiting behind busy workers,
    # and re-sending them would only lengthen the queue they wait in.
    busy = (
        TryRun.objects.filter(status=RUNNING, lease_until__gt=now).exists()
        or TryRun.objects.filter(finished_at__gte=cutoff).exists()
    )
    if idle and not busy:
        stale = TryRun.objects.filter(status=QUEUED, created_at__lt=cutoff).filter(
            Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff)
        )
        for run_id in list(stale.values_list("pk", flat=True)[:1000]):
            # one sweeper per run per stall period: the conditional UPDATE it wins
            if (
                TryRun.objects.filter(pk=run_id, status=QUEUED)
                .filter(Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff))
                .update(swept_at=now)
            ):
                log.warning("try run %s is still queued; its message was lost? sending it again", run_id)
                resend.append(run_id)
                lost += 1
    if resend:
        send(resend)
    return {"resent": len(resend), "queued": lost}
