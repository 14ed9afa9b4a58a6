"""Recovery of compiles: the work core's watcher and sweep (studio.work.watcher,
studio.work.sweep; docs/compiler.md, "Compiling in the studio"). The watcher renews the
leases of the compiles this process runs, sets a compile's cancel event when an author
asked to cancel it (the loop stops, and its in-flight planner call is dropped), and
stops a compile whose lease moved to another delivery. The sweep first closes each
lapsed compile that was cancelled while its worker was gone, then re-sends the other
lapsed ones and, when nothing moves, those whose message was lost. A re-sent compile
goes back through the one claim (worker.py), which resumes the loop from its work dir
after the last finished attempt."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from studio.compiles import shared
from studio.compiles.models import Compile
from studio.compiles.shared import S
from studio.work import sweep as sweeping
from studio.work.watcher import LeaseWatcher


class CompileWatcher(LeaseWatcher):
    model = Compile
    name = "compile-watcher"
    cancel_flag = True

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return sweep(idle=idle)


_watcher = CompileWatcher()


def watcher() -> CompileWatcher:
    return _watcher


def sweep(*, idle: bool) -> dict[str, int]:
    """Close the lapsed compiles cancelled while their worker was gone; re-send the ones
    dead workers or lost messages left behind. Returns how many of each."""
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
    lapsed_from = Compile.objects.filter(cancel_requested=False)
    counts = sweeping.sweep(Compile, idle=idle, noun="compile", resend=shared.send, lapsed_from=lapsed_from)
    return {**counts, "closed": closed}
