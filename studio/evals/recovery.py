"""Recovery: what keeps an eval's cases moving when workers die or stall.

- the **watcher** (one thread per worker process) renews the leases of the cases this
  process runs, and sets a case's cancel event when its eval is cancelled or its lease
  moved to another worker;
- the **sweep** (every PACKFORGE_EVAL_SWEEP_S, from the watcher) re-sends the cases
  whose lease lapsed, re-sends queued cases when nothing anywhere has moved for
  PACKFORGE_EVAL_STALL_S (a message lost with a killed worker), and ends evals whose
  cases are all final. A re-sent case goes back through the one claim in worker.py."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from studio.evals import shared
from studio.evals.models import Eval, EvalCase
from studio.evals.settings import setting
from studio.evals.shared import S, finish_if_done, lease

log = logging.getLogger("packforge.studio.evals")


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
            lease_until=timezone.now() + lease()
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
    lease_for = lease()
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
                lease_owner="", lease_until=now + lease_for
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
        shared.enqueue_cases(resend)
    return {"resent": len(resend), "closed": closed, "ended": ended}
