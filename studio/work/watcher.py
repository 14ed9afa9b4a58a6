"""The lease watcher: one daemon thread per worker process and kind of work, which
renews the leases of the rows this process holds (every quarter lease), marks a row
whose lease moved to another delivery as lost (and sets its cancel event), sets the
cancel event of rows whose `cancel_requested` is set (`cancel_flag`), and every
PACKFORGE_WORK_SWEEP_S calls the kind's sweep. Polls every PACKFORGE_WORK_POLL_S; off
when PACKFORGE_WORK_WATCH is false or tasks run inline (no worker to keep a lease for,
and a web process must not sweep)."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import close_old_connections, models

from studio.celery import app
from studio.work import leases
from studio.work.settings import setting

log = logging.getLogger("packforge.studio.work")


@dataclass
class Held:
    """A row this process runs under a lease; `cancel` stops its walk, `lost` says the
    lease moved to another delivery."""

    pk: int
    token: str
    group: int | None = None  # what the row belongs to (an eval), for the subclass's checks
    cancel: threading.Event = field(default_factory=threading.Event)
    lost: bool = False


class LeaseWatcher:
    """One per worker process and kind of work (see the module's docstring). A subclass
    names its model and its sweep."""

    model: type[models.Model]
    name = "lease-watcher"
    cancel_flag = False  # the model has `cancel_requested`: set the cancel event of those rows

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, Held] = {}
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._renewed = 0.0
        self._swept = 0.0

    # -- what a subclass says -----------------------------------------------------------

    def enabled(self) -> bool:
        return bool(setting("PACKFORGE_WORK_WATCH")) and not app.conf.task_always_eager

    def lease_for(self) -> timedelta:
        return leases.lease()

    def poll_s(self) -> float:
        return float(setting("PACKFORGE_WORK_POLL_S"))

    def sweep_s(self) -> float:
        return float(setting("PACKFORGE_WORK_SWEEP_S"))

    def sweep(self, *, idle: bool) -> dict[str, int]:
        raise NotImplementedError

    def check(self, held: list[Held]) -> None:
        """Every poll, with what this process holds: sets the cancel event of the rows
        whose cancel was asked for (`cancel_flag`)."""
        if not self.cancel_flag:
            return
        rows = self.model._default_manager.filter(pk__in=[h.pk for h in held], cancel_requested=True)
        flagged = set(rows.values_list("pk", flat=True))
        for h in held:
            if h.pk in flagged:
                h.cancel.set()

    # -- the thread ---------------------------------------------------------------------

    def register(self, pk: int, token: str, group: int | None = None) -> Held:
        held = Held(pk, token, group)
        with self._lock:
            self._held[pk] = held
        self.start()
        return held

    def unregister(self, pk: int) -> None:
        with self._lock:
            self._held.pop(pk, None)

    def snapshot(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def start(self) -> None:
        if not self.enabled():
            return
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._pid, self._thread, self._held = os.getpid(), None, {}
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._forever, name=self.name, daemon=True)
                self._thread.start()

    def _forever(self) -> None:
        while True:
            try:
                close_old_connections()
                self.tick()
            except Exception:  # the database away for a moment: the next poll tries again
                log.exception("%s: this round failed", self.name)
            time.sleep(self.poll_s())

    def tick(self, *, sweep_now: bool = False) -> None:
        held = self.snapshot()
        mono = time.monotonic()
        if held:
            self.check(held)
            if mono - self._renewed >= self.lease_for().total_seconds() / 4:
                self._renewed = mono
                self.renew(held)
        if sweep_now or mono - self._swept >= self.sweep_s():
            self._swept = mono
            self.sweep(idle=not held)

    def renew(self, held: list[Held]) -> None:
        leases.renew(self.model, [h.token for h in held], self.lease_for())
        now_owned = leases.owners(self.model, [h.pk for h in held])
        for h in held:
            if now_owned.get(h.pk) != h.token and h.pk in self._held:
                # Taken over (this process stalled past its lease) or closed elsewhere:
                # stop the walk; the fence refuses any write it still tries.
                h.lost = True
                h.cancel.set()
