"""Recovery of served runs, the story of try-it runs and eval cases (studio.leases):

- the **watcher** (one thread per worker process) renews the leases of the runs this
  process walks, stops a walk whose lease moved to another delivery, and sets a run's
  cancel event when its cancel was asked for (the walker stops; the openai backend
  drops its in-flight call);
- the **sweep** re-sends each running run whose lease lapsed (its worker is gone;
  exactly one sweeper wins each) and, when this process is idle, each run still queued
  PACKFORGE_EVAL_STALL_S after it was created or last re-sent (a lost message)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from studio.celery import app
from studio.deployments.models import ServedRun
from studio.deployments.settings import setting
from studio.leases import QUEUED, RUNNING, take_lapsed
from studio.watching import StudioWatcher

log = logging.getLogger("packforge.studio.deployments")

RUN_TASK = "deployments.execute_served_run"  # studio.deployments.tasks.execute_served_run


def lease() -> timedelta:
    return timedelta(seconds=setting("PACKFORGE_EVAL_LEASE_S"))


def send(pks: list[int]) -> None:
    """Send the run task for each served run, by name, to PACKFORGE_SERVE_QUEUE."""
    queue = setting("PACKFORGE_SERVE_QUEUE") or None
    with app.producer_or_acquire() as producer:
        for pk in pks:
            app.signature(RUN_TASK, args=(pk,)).apply_async(queue=queue, producer=producer)


def send_on_commit(pk: int) -> None:
    transaction.on_commit(lambda: send([pk]))


def hand_over(pk: int, token: str) -> bool:
    """Give run `pk`, held by `token` and still running, to the workers: marked re-sent
    as a sweep marks a lapsed run (owner "": any delivery may claim it; a fresh lease
    end, so no sweep sends it again before then), the claim not counted against
    PACKFORGE_SERVE_MAX_ATTEMPTS (nothing failed), and the task sent once that commits.
    The delivery that claims it resumes from the checkpoint. False when `token` no
    longer held it."""
    with transaction.atomic():
        given = ServedRun.objects.filter(pk=pk, lease_owner=token, status=RUNNING).update(
            lease_owner="", lease_until=timezone.now() + lease(), attempts=F("attempts") - 1
        )
        if given:
            send_on_commit(pk)
    return bool(given)


class ServeWatcher(StudioWatcher):
    model = ServedRun
    name = "serve-watcher"
    cancel_flag = True

    def lease_for(self) -> timedelta:
        return lease()

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


class WebWatcher(ServeWatcher):
    """A web process's watcher, for the runs it walks itself (a `?wait` request's run,
    studio.deployments.execute.walk_here): renews their leases and stops the ones whose
    cancel was asked for. It never sweeps: the workers do."""

    name = "serve-web-watcher"

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return {}


_watcher = ServeWatcher()
_web_watcher = WebWatcher()


def watcher() -> ServeWatcher:
    return _watcher


def web_watcher() -> WebWatcher:
    return _web_watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Re-send the runs dead workers or lost messages left behind; how many."""
    resend = take_lapsed(ServedRun.objects.all(), lease())
    for pk in resend:
        log.warning("served run %s lost its worker (lease lapsed); sending it again", pk)
    lost = 0
    now = timezone.now()
    cutoff = now - timedelta(seconds=setting("PACKFORGE_EVAL_STALL_S"))
    busy = (
        ServedRun.objects.filter(status=RUNNING, lease_until__gt=now).exists()
        or ServedRun.objects.filter(finished_at__gte=cutoff).exists()
    )
    if idle and not busy:
        stale = ServedRun.objects.filter(status=QUEUED, created_at__lt=cutoff).filter(
            Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff)
        )
        for pk in list(stale.values_list("pk", flat=True)[:1000]):
            if (
                ServedRun.objects.filter(pk=pk, status=QUEUED)
                .filter(Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff))
                .update(swept_at=now)
            ):
                log.warning("served run %s is still queued; its message was lost? sending it again", pk)
                resend.append(pk)
                lost += 1
    if resend:
        send(resend)
    return {"resent": len(resend), "queued": lost}
