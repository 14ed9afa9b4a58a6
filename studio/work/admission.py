"""Admission: how many runs one user, and one project, may have going at once
(docs/studio.md, "Limits"). Counted over every admitted kind together (try-it runs and
eval cases; served runs and compiles are not admitted here: a deployment's traffic has
its endpoint's slots, a compile its own queue):

- PACKFORGE_MAX_RUNS_PER_USER (4): runs of one user (who started the run or the eval);
- PACKFORGE_MAX_RUNS_PER_PROJECT (8): runs of one project, whoever started them.

A delivery that claimed a row over a cap does not run it (studio.work.delivery): it
**holds it back** — the row goes back to `queued` with the claim undone (`attempts` is
not charged, so being held back never counts towards the poison check), `held_at` set
and a note saying which cap it waits for (shown where the run is) — and it is sent again
when a run of the same user or project ends (`wake`). Nothing is refused: excess waits.

No lost wake-up: a delivery that held a row back counts again after writing it back; if
room appeared meanwhile (the run it waited for ended before the row was queued, so that
run's wake did not see it), it sends the row itself. A wake sends only rows whose own
user and project have room. What still slips through (a run ended by a sweep or a
cancel, not by its delivery; a message lost with a killed worker) is caught by the
kind's sweep: a row held longer than the stall period is sent again (`resend_stale_held`). A row sent twice is harmless: only
one delivery claims it. Two deliveries that hold each other back both count after
writing their rows back; the later one sees the other queued and sends itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.db.models import F
from django.utils import timezone

from studio.work.leases import QUEUED, RUNNING
from studio.work.settings import setting

log = logging.getLogger("packforge.studio.work")


@dataclass(frozen=True)
class Kind:
    """One admitted kind of leased row: its model, the lookups from a row to who started
    it and to its project (`user`, `project`), and how its task is sent (`resend`). The
    model has `held_at` (when admission last held the row back) and `note` names the text
    column the waiting reason is written to (cleared when the row is claimed)."""

    model: type[models.Model]
    user: str  # e.g. "created_by", "eval__created_by"
    project: str  # e.g. "project", "eval__project"
    resend: Callable[[list[int]], None]
    note: str = "error"

    def ids(self, row: models.Model) -> tuple[int, int]:
        """(user id, project id) of a row loaded with what the lookups cross."""
        return _follow(row, self.user), _follow(row, self.project)


def _follow(row: models.Model, lookup: str) -> int:
    *hops, last = lookup.split("__")
    obj: object = row
    for hop in hops:
        obj = getattr(obj, hop)
    return int(getattr(obj, f"{last}_id"))


KINDS: list[Kind] = []


def register(kind: Kind) -> Kind:
    """Admit `kind` (each worker module registers its own once, on import)."""
    if all(k.model is not kind.model for k in KINDS):
        KINDS.append(kind)
    return kind


def kind_of(model: type[models.Model]) -> Kind | None:
    """The admitted kind of `model`, once its worker module registered it."""
    return next((k for k in KINDS if k.model is model), None)


def per_user() -> int:
    return int(setting("PACKFORGE_MAX_RUNS_PER_USER"))


def per_project() -> int:
    return int(setting("PACKFORGE_MAX_RUNS_PER_PROJECT"))


def _going(field: str, value: int, now: datetime, leave_out: tuple[type[models.Model], int]) -> int:
    """Runs going (claimed, lease live) over every admitted kind whose `field` is `value`."""
    total = 0
    for kind in KINDS:
        lookup = kind.user if field == "user" else kind.project
        rows = kind.model._default_manager.filter(status=RUNNING, lease_until__gt=now, **{lookup: value})
        if kind.model is leave_out[0]:
            rows = rows.exclude(pk=leave_out[1])
        total += rows.count()
    return total


def crowded(kind: Kind, row: models.Model) -> str | None:
    """Why `row` must wait (a cap its user or project is at, named), or None: it may run."""
    user, project = kind.ids(row)
    now = timezone.now()
    me = (kind.model, int(row.pk))
    cap = per_user()
    going = _going("user", user, now, me)
    if going >= cap:
        return (
            f"waiting: its user has {going} runs going, the studio's cap per user "
            f"(PACKFORGE_MAX_RUNS_PER_USER={cap}); it starts when one of them ends"
        )
    cap = per_project()
    going = _going("project", project, now, me)
    if going >= cap:
        return (
            f"waiting: its project has {going} runs going, the studio's cap per project "
            f"(PACKFORGE_MAX_RUNS_PER_PROJECT={cap}); it starts when one of them ends"
        )
    return None


def claim_fields(kind: Kind) -> dict[str, object]:
    """What the claiming UPDATE of an admitted row clears: the waiting note, and
    `held_at` (so "held" always means "queued by admission now")."""
    return {kind.note: "", "held_at": None}


def hold_back(kind: Kind, row: models.Model, token: str, reason: str) -> bool:
    """Put a row this delivery claimed (by `token`) back in the queue, uncharged, with
    `reason`; send it again at once if room appeared meanwhile. False: the claim was
    lost first (nothing written)."""
    fields: dict[str, object] = {
        "status": QUEUED,
        "lease_owner": "",
        "lease_until": None,
        "attempts": F("attempts") - 1,
        "held_at": timezone.now(),
        kind.note: reason,
    }
    if getattr(row, "attempts", 0) == 1 and any(f.name == "started_at" for f in kind.model._meta.fields):
        fields["started_at"] = None  # the claim that stamped it is undone
    manager = kind.model._default_manager
    if not manager.filter(pk=row.pk, lease_owner=token, status=RUNNING).update(**fields):
        return False
    log.info("%s %s held back: %s", kind.model.__name__, row.pk, reason)
    if crowded(kind, row) is None:  # the run it waited for ended while it was being queued
        kind.resend([int(row.pk)])
    return True


def wake(kind: Kind, row: models.Model) -> int:
    """A run of `row`'s user and project ended: send the rows held back for either, the
    longest held first, as many as the caps now have room for (at least one: a row sent
    too many is held back again, one sent too few would wait for the next end). Returns
    how many."""
    user, project = kind.ids(row)
    now = timezone.now()
    nobody = (kind.model, -1)
    room = max(
        1,
        min(per_user() - _going("user", user, now, nobody), per_project() - _going("project", project, now, nobody)),
    )
    sent = 0
    for other in KINDS:
        held = other.model._default_manager.filter(status=QUEUED, held_at__isnull=False)
        mine = held.filter(**{other.user: user}) | held.filter(**{other.project: project})
        pks: list[int] = []
        # Only rows whose own user and project have room now: a row of another user of
        # the project may be free while this user's next one is still over its cap.
        hops = _hops(other)
        candidates = mine.order_by("held_at")
        if hops:
            candidates = candidates.select_related(*hops)
        for candidate in candidates[:WAKE_LOOKED_AT]:
            if crowded(other, candidate) is None:
                pks.append(int(candidate.pk))
                if sent + len(pks) >= room:
                    break
        if pks:
            other.resend(pks)
            sent += len(pks)
        if sent >= room:
            break
    return sent


WAKE_LOOKED_AT = 50  # held rows a wake looks at, at most (the rest wait for the next end or the sweep)
HELD_RESENT = 200  # stale held rows one sweep re-sends, at most


def _hops(kind: Kind) -> list[str]:
    """The relations `Kind.ids` crosses (select_related, so checking a candidate costs no query)."""
    return sorted({lookup.rsplit("__", 1)[0] for lookup in (kind.user, kind.project) if "__" in lookup})


def resend_stale_held(kind: Kind, older_than: timedelta) -> list[int]:
    """Held rows of `kind` not woken for `older_than` (their wake was lost: a message
    lost with a killed worker, a run ended by a sweep or a cancel rather than by its
    delivery): re-send them, each once per period (a re-sent row held again gets a new
    `held_at`). Called by the kind's sweep, busy or idle."""
    cutoff = timezone.now() - older_than
    stale = kind.model._default_manager.filter(status=QUEUED, held_at__lt=cutoff).order_by("held_at")
    pks = [int(pk) for pk in stale.values_list("pk", flat=True)[:HELD_RESENT]]
    if pks:
        kind.model._default_manager.filter(pk__in=pks, status=QUEUED).update(held_at=timezone.now())
        log.info("%d held %s rows not woken for %s; sending them again", len(pks), kind.model.__name__, older_than)
        kind.resend(pks)
    return pks
