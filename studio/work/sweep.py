"""The sweep: what a live worker does, every PACKFORGE_WORK_SWEEP_S, for the rows dead
workers and lost messages left behind, the same for every kind of leased row:

- each running row whose lease lapsed (its worker is gone) is re-sent, by exactly one
  sweeper (the conditional UPDATE of studio.work.leases.take_lapsed);
- when this process is idle and nothing of this kind moved for PACKFORGE_WORK_STALL_S
  (no live lease, nothing finished), each row still queued that long after it was
  created or last re-sent is re-sent: its message was lost (a killed worker had taken
  it off the queue). One sweeper per row per stall period (`swept_at`).

A duplicate message is harmless: its delivery claims nothing. A re-sent row goes back
through the one claim (studio.work.delivery), which resumes it from its checkpoint.
Also here: sending a kind's task for some rows (`send`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from studio.celery import app
from studio.work.leases import QUEUED, RUNNING, lease, take_lapsed
from studio.work.settings import setting

log = logging.getLogger("packforge.studio.work")

STALE_KEPT = 1000  # queued rows re-sent by one sweep, at most


def send(task: str, pks: Iterable[int], queue: str | None) -> None:
    """Send `task` for each pk, by the task's name, through one producer connection, to
    `queue` (None: the default queue). Callers send after commit, so a worker never sees
    an uncommitted row."""
    with app.producer_or_acquire() as producer:
        for pk in pks:
            app.signature(task, args=(pk,)).apply_async(queue=queue, producer=producer)


def send_on_commit(task: str, pk: int, queue: str | None) -> None:
    transaction.on_commit(lambda: send(task, [pk], queue))


def stall() -> timedelta:
    return timedelta(seconds=setting("PACKFORGE_WORK_STALL_S"))


def sweep(
    model: type[models.Model],
    *,
    idle: bool,
    noun: str,
    resend: Callable[[list[int]], None],
    lapsed_from: models.QuerySet[Any] | None = None,
) -> dict[str, int]:
    """The sweep of one kind (see the module's docstring): lapsed rows of `lapsed_from`
    (default: all of `model`) and, when `idle`, stale queued rows are passed to `resend`.
    Returns how many of each."""
    rows = lapsed_from if lapsed_from is not None else model._default_manager.all()
    lapsed = take_lapsed(rows, lease())
    for pk in lapsed:
        log.warning("%s %s lost its worker (lease lapsed); sending it again", noun, pk)
    stale = sweep_queued(model, noun=noun) if idle else []
    if lapsed or stale:
        resend(lapsed + stale)
    return {"resent": len(lapsed) + len(stale), "queued": len(stale)}


def sweep_queued(model: type[models.Model], *, noun: str) -> list[int]:
    """The queued rows of `model` to re-send: none while some row holds a live lease or
    one finished within the stall period (queued rows then wait behind busy workers, and
    re-sending them would only lengthen the queue they wait in); else each row queued
    longer than the stall period and not re-sent within it, marked re-sent (`swept_at`)
    by the conditional UPDATE that only one sweeper wins."""
    manager = model._default_manager
    now = timezone.now()
    cutoff = now - stall()
    busy = (
        manager.filter(status=RUNNING, lease_until__gt=now).exists() or manager.filter(finished_at__gte=cutoff).exists()
    )
    if busy:
        return []
    not_swept = Q(swept_at__isnull=True) | Q(swept_at__lt=cutoff)
    taken: list[int] = []
    stale = manager.filter(not_swept, status=QUEUED, created_at__lt=cutoff)
    for pk in list(stale.values_list("pk", flat=True)[:STALE_KEPT]):
        if manager.filter(not_swept, pk=pk, status=QUEUED).update(swept_at=now):
            log.warning("%s %s is still queued; its message was lost? sending it again", noun, pk)
            taken.append(pk)
    return taken
