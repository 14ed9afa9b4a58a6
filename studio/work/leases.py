"""Leases: how one unit of work (an eval case, a try-it run, a served run, a compile) is
held by exactly one task delivery at a time, whatever the broker and the workers do.
Below every app that leases work; imports none of them. A leased row has four columns: `status`, `attempts`,
`lease_owner` (the holding delivery's token) and `lease_until` (when the hold lapses
unless renewed).

- **Claim** (`claim`): one conditional UPDATE takes a queued row, or a running one whose
  lease lapsed (its worker is gone) or that a sweep re-sent (owner ""), bumps `attempts`
  and writes a fresh token. A delivery that claims nothing has nothing to do: the row is
  final, or another delivery holds a live lease. Counting claims is what lets a caller
  close a row that keeps killing its workers ("poisoned") instead of trying forever.
- **Renew** (`renew`): the worker process's watcher thread extends the leases it holds,
  every quarter lease, and learns from `owners` which of them moved to another delivery
  (it then stops that walk; the checkpoint's fencing token refuses any write it tries).
- **Close** (`close`): a final write matches only while the writer still holds the lease.
- **Sweep** (`take_lapsed`): a live worker marks each running row whose lease lapsed as
  re-sent (owner "", a fresh lease) with one conditional UPDATE per row, so exactly one
  sweeper re-sends it; the re-sent delivery goes back through `claim`.
- **Watch** (studio.work.watcher): the per-process thread that renews and sweeps.

The lease's length is PACKFORGE_WORK_LEASE_S (`lease()`), one for every kind of row.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, models
from django.db.models import F, Q
from django.utils import timezone

from studio import sqlwrites
from studio.work.settings import setting

log = logging.getLogger("packforge.studio.work")

QUEUED = "queued"
RUNNING = "running"


class LeaseLost(Exception):
    """The unit of work's lease passed to another delivery while this one ran (the
    watcher saw another owner, or a fenced write was refused). One class for every app
    that leases work: runs, eval cases, served runs, compiles."""


def lease() -> timedelta:
    """How long a claim holds a row unless renewed (PACKFORGE_WORK_LEASE_S)."""
    return timedelta(seconds=setting("PACKFORGE_WORK_LEASE_S"))


def new_token() -> str:
    return uuid.uuid4().hex


def claimable(now: datetime) -> Q:
    """Rows a delivery may claim now: queued, or running without a live holder."""
    return (
        Q(status=QUEUED)
        | Q(status=RUNNING, lease_until__lt=now)
        | Q(status=RUNNING, lease_owner="")
        | Q(status=RUNNING, lease_until__isnull=True)
    )


def claim(model: type[models.Model], pk: int, token: str, lease_for: timedelta, **fields: Any) -> bool:
    """Claim row `pk` for the delivery holding `token` (see the module's docstring);
    `fields` are written in the same UPDATE."""
    now = timezone.now()
    return bool(
        model._default_manager.filter(claimable(now), pk=pk).update(
            status=RUNNING, attempts=F("attempts") + 1, lease_owner=token, lease_until=now + lease_for, **fields
        )
    )


def held_from_start(token: str, lease_for: timedelta) -> dict[str, Any]:
    """The lease columns of a row created already claimed by the delivery holding
    `token` (its first claim: what `claim` would write on a queued row)."""
    now = timezone.now()
    return {"status": RUNNING, "attempts": 1, "lease_owner": token, "lease_until": now + lease_for}


def close(model: type[models.Model], pk: int, token: str, **fields: Any) -> bool:
    """Write `fields` (a final status, ...) if the delivery holding `token` still holds
    the lease; the lease is given up in the same UPDATE."""
    values = {"lease_owner": "", "lease_until": None, **fields}
    if any(hasattr(v, "resolve_expression") for v in values.values()):  # F(), Coalesce(): the ORM builds it
        return bool(model._default_manager.filter(pk=pk, lease_owner=token, status=RUNNING).update(**values))
    where = {model._meta.pk.name: pk, "lease_owner": token, "status": RUNNING}
    return bool(sqlwrites.update(model, where, values))


def release(model: type[models.Model], pk: int, token: str) -> None:
    """Give the lease up (best effort) so that a retried delivery may claim the row."""
    try:
        model._default_manager.filter(pk=pk, lease_owner=token).update(lease_owner="")
    except DatabaseError:
        pass


def renew(model: type[models.Model], tokens: Iterable[str], lease_for: timedelta) -> None:
    model._default_manager.filter(lease_owner__in=list(tokens), status=RUNNING).update(
        lease_until=timezone.now() + lease_for
    )


def owners(model: type[models.Model], pks: Iterable[int]) -> dict[int, str]:
    """Each row's current lease owner ("" when none)."""
    return dict(model._default_manager.filter(pk__in=list(pks)).values_list("pk", "lease_owner"))


def take_lapsed(rows: models.QuerySet[Any], lease_for: timedelta, limit: int = 1000) -> list[int]:
    """Of `rows`, the running ones whose lease lapsed, each marked re-sent (owner "", a
    fresh lease) by one conditional UPDATE that only one sweeper wins: the pks this
    caller must send again."""
    now = timezone.now()
    model = rows.model
    taken: list[int] = []
    # A running row with no lease at all (left by a worker before leases existed) has lapsed too.
    lapsed = rows.filter(Q(lease_until__lt=now) | Q(lease_until__isnull=True), status=RUNNING)
    for pk, owner, until in lapsed.values_list("pk", "lease_owner", "lease_until")[:limit]:
        if model._default_manager.filter(pk=pk, status=RUNNING, lease_owner=owner, lease_until=until).update(
            lease_owner="", lease_until=now + lease_for
        ):
            taken.append(pk)
    return taken
