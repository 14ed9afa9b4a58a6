"""Try-it runs survive a lost worker (studio.runs.worker.run_try, studio.runs.recovery):
a run left running is re-sent by the sweep once its lease lapses and resumes from its
database checkpoint, no tool call made twice; a run that keeps killing its worker is
closed; a run whose message was lost is re-sent."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runtime.cli import load_tools
from studio import host_tools
from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from studio.runs import recovery, start, worker
from studio.runs.models import TryRun

ROOT = Path(__file__).resolve().parents[3]
CALLS: list[tuple[str, str]] = []  # (tool, args) of every call that returned
KILL_IN: list[str] = []  # a tool named here dies as a killed worker would (once)


class Killed(BaseException):
    """What a SIGKILL looks like from inside: nothing after it runs (no except Exception)."""


def _counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        if name in KILL_IN:
            KILL_IN.remove(name)
            raise Killed(name)
        result = fn(**kwargs)
        CALLS.append((name, json.dumps(kwargs, sort_keys=True)))
        return result

    return call


TOOLS = {
    name: _counted(name, fn)
    for name, fn in (load_tools(f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry") or {}).items()
}
MESSAGE = json.loads((ROOT / "packs" / "refund_desk" / "evalset.jsonl").read_text().splitlines()[0])["input"]


@pytest.fixture
def refunds(owner: User, settings: Any) -> Iterator[Project]:
    settings.PACKFORGE_TOOLS = "tests.studio.runs.test_recovery:TOOLS"
    host_tools.forget()
    CALLS.clear()
    KILL_IN.clear()
    yield create_project(
        slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"), message="Create"
    )
    host_tools.forget()


@pytest.fixture
def refunder(staff: User, tmp_path: Path) -> Endpoint:
    """A scripted model that approves MESSAGE's refund (the pack's own script answers by
    case id, which a try-it run has not)."""
    script = json.loads((ROOT / "packs" / "refund_desk" / "fakes" / "scripted.json").read_text())
    answers = script["cases"]["rd-01"]
    path = tmp_path / "refunder.json"
    path.write_text(json.dumps({"inputs": [{"match": MESSAGE, "answers": answers}]}))
    return Endpoint.objects.create(name="refunder", spec=f"fake:{path}", created_by=staff)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    got: list[int] = []
    monkeypatch.setattr(recovery, "send", got.extend)
    return got


def _lapse(run: TryRun) -> None:
    TryRun.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=1))


def test_it_resumes_a_run_whose_worker_died_without_repeating_a_tool_call(
    refunds: Project, owner: User, refunder: Endpoint, sent: list[int]
) -> None:
    run = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    KILL_IN.append("issue_refund")
    with pytest.raises(Killed):
        worker.run_try(run.pk)
    run.refresh_from_db()
    assert run.status == "running" and run.attempts == 1 and CALLS == [("lookup_order", '{"order_id": "ORD-10001"}')]

    assert recovery.sweep(idle=False) == {"resent": 0, "queued": 0, "held": 0}  # its lease is still live
    _lapse(run)
    assert recovery.sweep(idle=False)["resent"] == 1 and sent == [run.pk]
    assert recovery.sweep(idle=False)["resent"] == 0  # re-sent once

    assert worker.run_try(run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 2 and run.output["refund_id"] == "R-ORD-10001"
    assert Counter(tool for tool, _ in CALLS) == Counter({"lookup_order": 1, "issue_refund": 1})
    calls = {c["tool"]: c for c in run.trace["tool_calls"]}
    assert calls["lookup_order"]["replayed"] and not calls["issue_refund"]["replayed"]


def test_it_does_nothing_for_a_run_another_delivery_holds(refunds: Project, owner: User, refunder: Endpoint) -> None:
    run = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    KILL_IN.append("lookup_order")
    with pytest.raises(Killed):
        worker.run_try(run.pk)
    assert worker.run_try(run.pk) is None  # the first delivery's lease is live
    assert TryRun.objects.get(pk=run.pk).attempts == 1


def test_it_closes_a_run_that_keeps_killing_its_worker(
    refunds: Project, owner: User, refunder: Endpoint, settings: Any, sent: list[int]
) -> None:
    settings.PACKFORGE_RUN_MAX_ATTEMPTS = 2
    run = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    for _ in range(2):
        KILL_IN.append("issue_refund")
        with pytest.raises(Killed):
            worker.run_try(run.pk)
        _lapse(run)
        recovery.sweep(idle=False)
    assert worker.run_try(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and run.attempts == 3 and "PACKFORGE_RUN_MAX_ATTEMPTS=2" in run.error
    assert run.lease_owner == "" and run.finished_at


def test_it_resends_a_run_whose_message_was_lost(
    refunds: Project, owner: User, refunder: Endpoint, settings: Any, sent: list[int]
) -> None:
    settings.PACKFORGE_WORK_STALL_S = 60.0
    run = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    assert recovery.sweep(idle=True)["queued"] == 0  # queued a moment ago: not lost yet
    TryRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    assert recovery.sweep(idle=False)["queued"] == 0  # a busy worker leaves it to an idle one
    assert recovery.sweep(idle=True)["queued"] == 1 and sent == [run.pk]
    assert recovery.sweep(idle=True)["queued"] == 0  # once per stall period
    assert worker.run_try(run.pk) == "done"


def test_it_resends_a_run_left_running_with_no_lease_at_all(
    refunds: Project, owner: User, refunder: Endpoint, sent: list[int]
) -> None:
    # As a worker from before leases left it: running, no owner, no lease time.
    run = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    TryRun.objects.filter(pk=run.pk).update(status="running", lease_owner="", lease_until=None)
    assert recovery.sweep(idle=False)["resent"] == 1 and sent == [run.pk]
    assert worker.run_try(run.pk) == "done"


def test_it_leaves_queued_runs_alone_while_other_runs_move(
    refunds: Project, owner: User, refunder: Endpoint, settings: Any, sent: list[int]
) -> None:
    settings.PACKFORGE_WORK_STALL_S = 60.0
    waiting = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    TryRun.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    busy = start.new_try_run(refunds, user=owner, version=None, endpoint=refunder, input=MESSAGE)
    TryRun.objects.filter(pk=busy.pk).update(
        status="running", lease_owner="w1", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert recovery.sweep(idle=True)["queued"] == 0 and sent == []  # a worker is busy: behind it, not lost
    TryRun.objects.filter(pk=busy.pk).update(
        status="done", lease_owner="", finished_at=timezone.now() - timedelta(seconds=61)
    )
    assert recovery.sweep(idle=True)["queued"] == 1 and sent == [waiting.pk]  # nothing moved for a stall period
