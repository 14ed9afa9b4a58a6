"""Recovery of served runs: the work core's watcher and sweep (studio.work.watcher,
studio.work.sweep), as for try-it runs and eval cases. The watcher renews the leases of
the runs this process walks, stops a walk whose lease moved to another delivery, and
sets a run's cancel event when its cancel was asked for (the walker stops; the openai
backend drops its in-flight call); the sweep re-sends lapsed runs and, when nothing
moves, runs whose message was lost. Also here: handing a run the web process walked to
the workers (`hand_over`)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from studio.deployments.models import ServedRun
from studio.deployments.settings import setting
from studio.work import sweep as sweeping
from studio.work.leases import RUNNING, lease
from studio.work.watcher import LeaseWatcher

RUN_TASK = "deployments.execute_served_run"  # studio.deployments.tasks.execute_served_run


def send(pks: list[int]) -> None:
    """Send the run task for each served run, by name, to PACKFORGE_SERVE_QUEUE."""
    sweeping.send(RUN_TASK, pks, setting("PACKFORGE_SERVE_QUEUE") or None)


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


def sweep(*, idle: bool) -> dict[str, int]:
    """Re-send the runs dead workers or lost messages left behind; how many."""
    return sweeping.sweep(ServedRun, idle=idle, noun="served run", resend=send)


class ServeWatcher(LeaseWatcher):
    model = ServedRun
    name = "serve-watcher"
    cancel_flag = True

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


class WebWatcher(ServeWatcher):
    """A web process's watcher, for the runs it walks itself (a `?wait` request's run,
    studio.deployments.worker.walk_here): renews their leases and stops the ones whose
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
