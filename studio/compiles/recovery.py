"""Recovery of compiles: what keeps a compile moving when its worker dies, the same
story as try-it runs (studio.leases; docs/compiler.md, "Compiling in the studio").

- the **watcher** (one thread per worker process, studio.leases.LeaseWatcher) renews
  the leases of the compiles this process runs, sets a compile's cancel event when an
  author asked to cancel it (the loop stops, and its in-flight planner call is dropped),
  and stops a compile whose lease moved to another delivery;
- the **sweep** (every PACKFORGE_EVAL_SWEEP_S, from the watcher) re-sends each running
  compile whose lease lapsed (its worker is gone; exactly one sweeper wins each) or
  closes it when it was cancelled meanwhile, and, when this process is idle, re-sends
  each compile still queued PACKFORGE_EVAL_STALL_S after it was created or last re-sent
  (its message was lost). A re-sent compile goes back through the one claim in
  worker.py, which resumes the loop from its work dir after the last finished attempt."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from studio.compiles import shared
from studio.compiles.models import Compile
from studio.compiles.shared import S, lease
from studio.evals.settings import setting
from studio.leases import take_lapsed
from studio.watching import StudioWatcher

log = logging.getLogger("packforge.studio.compiles")


class CompileWatcher(StudioWatcher):
    model = Compile
    name = "compile-watcher"
    cancel_flag = True

    def lease_for(self) -> timedelta:
        return lease()

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


_watcher = CompileWatcher()


def watcher() -> CompileWatcher:
    return _watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Re-send the compiles dead workers or lost messages left behind; close the ones
    cancelled while their worker was gone. Returns how many of each."""
    now = timezone.now()
    closed = Compile.objects.filter(
        Q(lease_until__lt=now) | Q(lease_until__isnull=True), status=S.RUNNING, cancel_requested=True
    ).update(
        status=S.CANCELLED,
        lease_owner="",
        lease_until=None,
        finished_at=now,
        stage="cancelled",
        message="cancelled; its worker was gone",
    )
    resend = take_lapsed(Compile.objects.filter(cancel_requested=False), lease())
    for pk in resend:
        log.warning("compile %s lost its worker (lease lapsed); sending it again", pk)
    lost = 0
    cutoff = now - timedelta(seconds=setting("PACKFORGE_EVAL_STALL_S"))
    # Queued compiles are only lost when nothing moves: while one holds a live lease or
    # one finished within the stall period, they wait behind busy workers.
    busy = (
        Compile.objects.filter(status=S.RUNNING, lease_until__gt=now).exists()
        or Compile.objects.filter(finished_at__gte=cutoff).exists()
    )
    if idle and not busy:
        stale = Compile.objects.filter(status=S.QUEUED, created_at__lt=cutoff).filter(
            Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff)
        )
        for pk in list(stale.values_list("pk", flat=True)[:1000]):
            if (
                Compile.objects.filter(pk=pk, status=S.QUEUED)
                .filter(Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff))
                .update(swept_at=now)
            ):
                log.warning("compile %s is still queued; its message was lost? sending it again", pk)
                resend.append(pk)
                lost += 1
    if resend:
        shared.send(resend)
    return {"resent": len(resend), "queued": lost, "closed": closed}
