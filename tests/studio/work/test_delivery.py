"""The one delivery template (studio.work.delivery), on real TryRun rows: the claim, the
poison check, and the ladder from what a run raised to the row's status, written once for
every kind of leased work."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError

from runtime import FencedOut
from studio.projects.models import Project
from studio.runs.models import TryRun
from studio.work import leases
from studio.work.delivery import Delivery, poisoned
from studio.work.leases import LeaseLost
from studio.work.watcher import Held, LeaseWatcher


class Refusal(Exception):
    """What the kind below knows as a refusal (a pack that does not load, say)."""


class Watcher(LeaseWatcher):
    model = TryRun
    name = "test-watcher"

    def enabled(self) -> bool:
        return False  # no thread: the test's transaction holds the only connection

    def sweep(self, *, idle: bool) -> dict[str, int]:
        return {}


WATCHER = Watcher()


class Kind(Delivery[TryRun]):
    """A kind whose run raises `raises` (or writes "done"), recording what it saw."""

    model = TryRun
    noun = "test run"
    max_claims_setting = "TEST_MAX_CLAIMS"
    failed = TryRun.Status.FAILED

    def __init__(self, pk: int, raises: BaseException | None = None, *, cancelled: bool = False) -> None:
        super().__init__(pk)
        self.raises = raises
        self.cancelled = cancelled
        self.held: list[Held] = []
        self.settled_with: list[str] = []

    def load(self) -> TryRun:
        return TryRun.objects.get(pk=self.pk)

    def watcher(self) -> LeaseWatcher:
        return WATCHER

    def max_claims(self) -> int:
        return 2

    def before(self, row: TryRun) -> tuple[bool, str | None]:
        if not self.cancelled:
            return False, None
        return True, ("cancelled" if self.end(row, "cancelled", "cancelled") else None)

    def run(self, row: TryRun, held: Held) -> str | None:
        self.held.append(held)
        assert [h.pk for h in WATCHER.snapshot()] == [self.pk]  # watched while it runs
        if self.raises is not None:
            raise self.raises
        return "done" if leases.close(TryRun, self.pk, self.token, status="done", error="") else None

    def end(self, row: TryRun, status: str, error: str) -> bool:
        return leases.close(TryRun, self.pk, self.token, status=status, error=error)

    def refusal(self, exc: Exception) -> str | None:
        return f"refused: {exc}" if isinstance(exc, Refusal) else None

    def settled(self, row: TryRun, status: str) -> None:
        self.settled_with.append(status)


@pytest.fixture
def run(project: Project, owner: User) -> TryRun:
    return TryRun.objects.create(project=project, version="0" * 40, input={"x": 1}, created_by=owner)


def _row(run: TryRun) -> TryRun:
    run.refresh_from_db()
    return run


def test_a_run_that_ends_writes_its_status_once_and_is_no_longer_watched(run: TryRun) -> None:
    kind = Kind(run.pk)
    assert kind.deliver() == "done"
    row = _row(run)
    assert (row.status, row.attempts, row.lease_owner) == ("done", 1, "")
    assert kind.settled_with == ["done"] and WATCHER.snapshot() == []
    assert Kind(run.pk).deliver() is None  # final: a second delivery claims nothing


@pytest.mark.parametrize("raised", [FencedOut("fence 2, this writer has 1"), LeaseLost(1)])
def test_a_delivery_that_lost_the_row_writes_nothing(run: TryRun, raised: Exception) -> None:
    kind = Kind(run.pk, raised)
    assert kind.deliver() is None
    row = _row(run)
    assert row.status == "running" and row.lease_owner == kind.token and row.error == ""
    assert kind.settled_with == [] and WATCHER.snapshot() == []


def test_a_database_error_gives_the_lease_up_and_is_raised_for_the_task_to_retry(run: TryRun) -> None:
    with pytest.raises(OperationalError):
        Kind(run.pk, OperationalError("the database went away")).deliver()
    row = _row(run)
    assert row.status == "running" and row.lease_owner == ""  # any delivery may claim it now
    assert Kind(run.pk).deliver() == "done"


def test_a_refusal_ends_the_row_failed_with_its_message(run: TryRun) -> None:
    kind = Kind(run.pk, Refusal("the pack does not load"))
    assert kind.deliver() == "failed"
    row = _row(run)
    assert (row.status, row.error) == ("failed", "refused: the pack does not load")
    assert kind.settled_with == ["failed"]


def test_any_other_exception_ends_the_row_as_an_internal_error_with_the_stack_in_the_log(
    run: TryRun, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="packforge.studio.work"):
        assert Kind(run.pk, KeyError("node")).deliver() == "failed"
    assert _row(run).error == "internal error: KeyError: 'node'"
    assert any(r.exc_info and "test run" in r.getMessage() for r in caplog.records)


def test_a_row_claimed_more_than_its_limit_is_closed_as_poisoned_without_running(run: TryRun) -> None:
    TryRun.objects.filter(pk=run.pk).update(attempts=2, status="running", lease_owner="")  # two deliveries died
    kind = Kind(run.pk)
    assert kind.deliver() == "failed"
    row = _row(run)
    assert row.error == poisoned("test run", 3, "TEST_MAX_CLAIMS", 2)
    assert "killed its worker 2 times" in row.error and "TEST_MAX_CLAIMS=2" in row.error
    assert kind.held == []  # never ran


def test_before_may_end_the_delivery_before_the_run(run: TryRun) -> None:
    kind = Kind(run.pk, cancelled=True)
    assert kind.deliver() == "cancelled"
    assert _row(run).status == "cancelled" and kind.held == []


def test_a_row_created_held_is_delivered_without_a_claim(run: TryRun) -> None:
    token = leases.new_token()
    fields: dict[str, Any] = leases.held_from_start(token, leases.lease())
    TryRun.objects.filter(pk=run.pk).update(**fields)
    assert Kind(run.pk).deliver() is None  # held by `token`: a claim takes nothing
    assert Kind(run.pk).deliver_held(token) == "done"
