"""The lease watcher every studio app runs on (studio.leases.LeaseWatcher), on the
shared settings: PACKFORGE_EVAL_WATCH, _POLL_S and _SWEEP_S. A subclass names its model,
its lease and its sweep; `cancel_flag` makes it stop the rows whose `cancel_requested`
is set."""

from __future__ import annotations

from studio.celery import app
from studio.evals.settings import setting
from studio.leases import Held, LeaseWatcher


class StudioWatcher(LeaseWatcher):
    cancel_flag = False  # the model has `cancel_requested`: set the cancel event of those rows

    def enabled(self) -> bool:
        # Tasks run inline (tests, a studio without a worker): no worker to keep a lease
        # for, and a web process must not sweep.
        return bool(setting("PACKFORGE_EVAL_WATCH")) and not app.conf.task_always_eager

    def poll_s(self) -> float:
        return float(setting("PACKFORGE_EVAL_POLL_S"))

    def sweep_s(self) -> float:
        return float(setting("PACKFORGE_EVAL_SWEEP_S"))

    def check(self, held: list[Held]) -> None:
        if not self.cancel_flag:
            return
        rows = self.model.objects.filter(pk__in=[h.pk for h in held], cancel_requested=True)  # type: ignore[attr-defined]
        flagged = set(rows.values_list("pk", flat=True))
        for h in held:
            if h.pk in flagged:
                h.cancel.set()
