"""Admission (studio.work.admission): a user, or a project, with as many runs going as
the studio's cap gets its next run held back (queued again, uncharged, with a note naming
the cap) and sent again when one of the runs going ends; nothing is refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from studio.evals import worker as eval_worker
from studio.evals.models import EvalCase
from studio.projects.models import Project
from studio.runs import recovery, start, worker
from studio.runs.models import TryRun
from studio.work import admission
from studio.work import sweep as sweeping
from tests.support.studio import CHARGED_TWICE as CASE
from tests.support.studio import start as start_eval


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[int]]]:
    """The tasks sent (by name, with their row ids) instead of going to a broker."""
    got: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(sweeping, "send", lambda task, pks, queue: got.append((task, list(pks))))
    return got


def _going(model: type[Any], pk: int) -> None:
    """Another delivery holds the row with a live lease: it counts as a run going."""
    model.objects.filter(pk=pk).update(
        status="running", lease_owner="elsewhere", lease_until=timezone.now() + timedelta(minutes=5), attempts=1
    )


def _new(project: Project, user: User) -> TryRun:
    return start.new_try_run(project, user=user, version=None, endpoint=None, input=CASE)


def test_a_run_over_the_users_cap_is_held_back_uncharged_and_sent_when_the_run_going_ends(
    project: Project, owner: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    first, second = _new(project, owner), _new(project, owner)
    _going(TryRun, first.pk)

    assert worker.run_try(second.pk) is None
    second.refresh_from_db()
    assert second.status == "queued" and second.attempts == 0 and second.held_at is not None
    assert "PACKFORGE_MAX_RUNS_PER_USER=1" in second.error and "1 runs going" in second.error
    assert sent == []  # the run it waits for is still going

    # Held back again and again, it is never charged a claim: the poison check cannot end it.
    for _ in range(5):
        assert worker.run_try(second.pk) is None
    second.refresh_from_db()
    assert second.attempts == 0

    TryRun.objects.filter(pk=first.pk).update(status="queued", lease_owner="", lease_until=None, attempts=0)
    assert worker.run_try(first.pk) == "done"
    assert sent == [("runs.execute_try_run", [second.pk])]  # its end woke the held-back run

    assert worker.run_try(second.pk) == "done"
    second.refresh_from_db()
    assert second.attempts == 1 and second.error == "" and second.output is not None


def test_the_project_cap_holds_back_a_teammates_run(
    project: Project, owner: User, reviewer: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_PROJECT = 1
    mine, theirs = _new(project, owner), _new(project, reviewer)
    _going(TryRun, mine.pk)
    assert worker.run_try(theirs.pk) is None
    theirs.refresh_from_db()
    assert theirs.status == "queued" and "PACKFORGE_MAX_RUNS_PER_PROJECT=1" in theirs.error


def test_below_the_caps_a_run_runs_at_once(project: Project, owner: User, settings: Any) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 2
    first, second = _new(project, owner), _new(project, owner)
    _going(TryRun, first.pk)
    assert worker.run_try(second.pk) == "done"


def test_eval_cases_and_try_it_runs_count_together(
    project: Project, owner: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    ev = start_eval(project, owner)
    case = EvalCase.objects.filter(eval=ev).order_by("pk").first()
    assert case is not None
    _going(EvalCase, case.pk)

    run = _new(project, owner)
    assert worker.run_try(run.pk) is None  # the eval case is the user's one run going
    other = EvalCase.objects.filter(eval=ev).exclude(pk=case.pk).order_by("pk").first()
    assert other is not None
    assert eval_worker.run_eval_case(other.pk) is None
    other.refresh_from_db()
    assert other.status == "queued" and other.attempts == 0 and other.started_at is None
    assert "PACKFORGE_MAX_RUNS_PER_USER=1" in other.error


def test_a_run_held_back_while_the_run_it_waited_for_ended_sends_itself(
    project: Project, owner: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    """No lost wake-up: the run going ended (and its wake found nothing held back) between
    this delivery's count and its writing the row back; the count after writing it sees
    room, and the delivery sends the row itself."""
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    run = _new(project, owner)
    TryRun.objects.filter(pk=run.pk).update(
        status="running", lease_owner="me", lease_until=timezone.now() + timedelta(minutes=5), attempts=1
    )
    run.refresh_from_db()
    kind = worker.TryRunDelivery.admitted
    assert kind is not None
    assert admission.hold_back(kind, run, "me", "waiting: (the count said so a moment ago)")
    assert sent == [("runs.execute_try_run", [run.pk])]
    run.refresh_from_db()
    assert run.status == "queued" and run.attempts == 0


def test_a_hold_back_by_a_delivery_that_lost_the_claim_writes_nothing(project: Project, owner: User) -> None:
    run = _new(project, owner)
    _going(TryRun, run.pk)
    run.refresh_from_db()
    kind = worker.TryRunDelivery.admitted
    assert kind is not None
    assert not admission.hold_back(kind, run, "not-the-holder", "waiting")
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == "elsewhere"


def test_a_run_that_ends_sends_as_many_held_rows_as_there_is_room_for(
    project: Project, owner: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 2
    going = [_new(project, owner) for _ in range(2)]
    for run in going:
        _going(TryRun, run.pk)
    held = [_new(project, owner) for _ in range(3)]
    for run in held:
        assert worker.run_try(run.pk) is None
    assert TryRun.objects.filter(pk__in=[r.pk for r in held], held_at__isnull=False, status="queued").count() == 3
    TryRun.objects.filter(pk=going[0].pk).update(status="queued", lease_owner="", lease_until=None, attempts=0)
    assert worker.run_try(going[0].pk) == "done"
    # One run still going of two allowed: room for one, the longest held.
    assert sent == [("runs.execute_try_run", [held[0].pk])]


def test_a_held_run_whose_wake_was_lost_is_sent_again_by_the_sweep(
    project: Project, owner: User, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    """Its wake was lost (the run it waited for was ended by a sweep, or the message went
    with a killed worker): once it has been held longer than the stall period, a sweep
    sends it again, busy or idle."""
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    first, second = _new(project, owner), _new(project, owner)
    _going(TryRun, first.pk)
    assert worker.run_try(second.pk) is None
    assert recovery.sweep(idle=False)["held"] == 0  # held just now: not stale yet
    TryRun.objects.filter(pk=second.pk).update(held_at=timezone.now() - timedelta(minutes=5))
    assert recovery.sweep(idle=False)["held"] == 1
    assert ("runs.execute_try_run", [second.pk]) in sent
    assert recovery.sweep(idle=False)["held"] == 0  # once per period


def test_claiming_a_held_run_clears_its_mark(project: Project, owner: User, settings: Any, sent: Any) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    first, second = _new(project, owner), _new(project, owner)
    _going(TryRun, first.pk)
    assert worker.run_try(second.pk) is None
    TryRun.objects.filter(pk=first.pk).update(status="done", lease_owner="")
    assert worker.run_try(second.pk) == "done"
    second.refresh_from_db()
    assert second.held_at is None and second.error == ""


def test_a_held_eval_case_reads_as_queued_with_its_note_not_as_an_error(
    project: Project, owner: User, as_owner: Client, settings: Any, sent: list[tuple[str, list[int]]]
) -> None:
    settings.PACKFORGE_MAX_RUNS_PER_USER = 1
    ev = start_eval(project, owner)
    first, second = EvalCase.objects.filter(eval=ev).order_by("pk")[:2]
    _going(EvalCase, first.pk)
    assert eval_worker.run_eval_case(second.pk) is None
    html = as_owner.get(f"/p/triage/evals/{ev.pk}/cases/{second.case_id}/0").content.decode()
    assert 'id="case-waiting">Queued, waiting: its user has 1 runs going' in html
    assert "Error: waiting" not in html
