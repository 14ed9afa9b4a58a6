"""Recovery of try-it runs: the work core's watcher and sweep (studio.work.watcher,
studio.work.sweep; docs/studio.md, "Try-it runs survive a crash"). The watcher renews
the leases of the runs this process walks and stops a walk whose lease moved to another
delivery; the sweep re-sends lapsed runs and, when nothing moves, runs whose message was
lost. A re-sent run goes back through the one claim (worker.py), which resumes it from
its database checkpoint."""

from __future__ import annotations

from studio.runs.models import TryRun
from studio.runs.settings import setting
from studio.work import admission
from studio.work import sweep as sweeping
from studio.work.watcher import LeaseWatcher

RUN_TASK = "runs.execute_try_run"  # studio.runs.tasks.execute_try_run


def send(run_ids: list[int]) -> None:
    """Send `runs.execute_try_run` for each id, by name (tasks.py imports this module),
    to PACKFORGE_RUN_QUEUE ("" = the default queue)."""
    sweeping.send(RUN_TASK, run_ids, setting("PACKFORGE_RUN_QUEUE") or None)


def sweep(*, idle: bool) -> dict[str, int]:
    """Re-send the runs dead workers or lost messages left behind, and runs held back by
    admission whose wake-up was lost (studio.work.admission); how many."""
    done = sweeping.sweep(TryRun, idle=idle, noun="try run", resend=send)
    admitted = admission.kind_of(TryRun)  # registered by studio.runs.worker, which every worker imports
    done["held"] = len(admission.resend_stale_held(admitted, sweeping.stall())) if admitted is not None else 0
    return done


class RunWatcher(LeaseWatcher):
    model = TryRun
    name = "run-watcher"

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


_watcher = RunWatcher()


def watcher() -> RunWatcher:
    return _watcher
