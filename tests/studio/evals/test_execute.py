"""A case task in a worker: scored into its row, idempotent, resumed after a kill without
repeating a tool call, dropped when a stalled worker was taken over, stopped by cancel.

Worker deaths are simulated in-process: the model raises `WorkerKilled` (a
BaseException, like the SystemExit of a dying process: nothing after it runs), and the
case's lease is then made to lapse, as it would once its worker stopped renewing it.
tests/integration/test_eval_kill.py does the same with a real worker and SIGKILL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runtime.backends.base import ModelCall, ModelReply
from studio.evals import recovery, shared, worker
from studio.evals.models import Eval, EvalCase
from studio.evals.start import EvalRefused, cancel_eval, start_eval
from studio.projects.models import Project
from studio.work.models import RunCheckpoint
from tests.support.studio import run_all, scripted_endpoint, start

pytestmark = pytest.mark.django_db


class WorkerKilled(BaseException):
    """Stands for the worker process dying: no handler in the task runs after it."""


class Interposed:
    """The eval's real model, with `before(call)` run ahead of each call."""

    def __init__(self, inner: Any, before: Any) -> None:
        self.inner, self.before, self.spec = inner, before, inner.spec

    def complete(self, call: ModelCall) -> ModelReply:
        self.before(call)
        return self.inner.complete(call)

    def close(self) -> None:
        self.inner.close()


def interpose(monkeypatch: pytest.MonkeyPatch, before: Any) -> None:
    real = worker.open_model
    monkeypatch.setattr(worker, "open_model", lambda ev, pack: Interposed(real(ev, pack), before))


def case_row(ev: Eval, case_id: str, repeat: int = 0) -> EvalCase:
    return EvalCase.objects.get(eval=ev, case_id=case_id, repeat=repeat)


def lapse(row: EvalCase) -> None:
    """The lease of a worker that stopped renewing it."""
    EvalCase.objects.filter(pk=row.pk).update(lease_until=timezone.now() - timedelta(seconds=1))


def test_it_scores_a_case_into_its_row(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    assert worker.run_eval_case(row.pk) == "passed"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.run_status, row.lease_owner) == ("passed", 1, "done", "")
    assert row.path[0] == "classify" and row.edges and row.tier
    assert row.rejections.get("parse") == 1 and row.generations > row.path.count("classify")
    assert row.trace["status"] == "done" and row.started_at and row.finished_at


def test_it_keeps_rejected_generations_in_the_trace(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    run_all(ev)
    rejected = [a for a in EvalCase.objects.get(eval=ev).trace["attempts"] if not a["ok"]]
    assert rejected and rejected[0]["category"] == "parse" and rejected[0]["text"]


def test_it_does_nothing_for_a_final_case(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    worker.run_eval_case(row.pk)
    assert worker.run_eval_case(row.pk) is None
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("passed", 1)


def test_it_leaves_a_case_to_the_worker_holding_its_lease(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(
        status="running", attempts=1, lease_owner="another-worker", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert worker.run_eval_case(row.pk) is None
    row.refresh_from_db()
    assert (row.status, row.attempts, row.lease_owner) == ("running", 1, "another-worker")


def test_it_ends_the_eval_with_a_summary_when_the_last_case_is_final(
    project: Project, owner: User, sent: list[int]
) -> None:
    ev = start(project, owner)
    outcomes = run_all(ev)
    ev.refresh_from_db()
    assert ev.status == "done" and ev.finished_at is not None
    assert ev.summary["counts"]["passed"] == outcomes.count("passed") == ev.total
    assert ev.summary["metrics"]["pass_rate"] == 1.0


def test_it_runs_each_repeat_as_its_own_run(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"], repeats=3)
    assert run_all(ev) == ["passed"] * 3
    assert sorted(RunCheckpoint.objects.values_list("run_id", flat=True)) == [
        f"eval{ev.pk}-{row.case_id}-{r}" for r in range(3) for row in [EvalCase.objects.filter(eval=ev).first()]
    ]


def test_it_resumes_a_killed_case_without_repeating_a_tool_call(
    refunds: Project, owner: User, tool_calls: list[Any], sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = start(refunds, owner)
    row = case_row(ev, "rd-01")  # intent > lookup (tool) > approve > check_amount > refund (tool) > refunded
    kills = [1]

    def die_at_approve(call: ModelCall) -> None:
        if call.node == "approve" and kills:
            kills.pop()
            raise WorkerKilled()

    interpose(monkeypatch, die_at_approve)
    with pytest.raises(WorkerKilled):
        worker.run_eval_case(row.pk)
    assert [t for t, _ in tool_calls] == ["lookup_order"]
    row.refresh_from_db()
    assert row.status == "running"
    assert worker.run_eval_case(row.pk) is None  # its lease is still live: nobody else may run it
    lapse(row)
    assert worker.run_eval_case(row.pk) == "passed"
    row.refresh_from_db()
    assert [t for t, _ in tool_calls] == ["lookup_order", "issue_refund"]  # the lookup was replayed
    assert (row.attempts, row.status) == (2, "passed")
    lookup = next(c for c in row.trace["tool_calls"] if c["tool"] == "lookup_order")
    assert lookup["replayed"] and row.trace["steps"][0]["replayed"]


def test_it_marks_a_case_that_keeps_killing_workers_as_an_error(
    project: Project, owner: User, sent: list[int], settings: Any
) -> None:
    settings.PACKFORGE_EVAL_MAX_ATTEMPTS = 3
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(
        status="running", attempts=3, lease_owner="dead", lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert worker.run_eval_case(row.pk) == "error"
    row.refresh_from_db()
    assert row.status == "error" and "killed its worker 3 times" in row.error
    assert not RunCheckpoint.objects.exists()  # it was not run a fourth time
    ev.refresh_from_db()
    assert ev.status == "done"


def test_it_drops_a_stalled_delivery_once_another_took_the_case_over(
    refunds: Project, owner: User, tool_calls: list[Any], sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = start(refunds, owner)
    row = case_row(ev, "rd-01")
    outcomes: list[str | None] = []

    def stall_then_lose_the_case(call: ModelCall) -> None:
        if call.node == "approve" and not outcomes:
            outcomes.append("stalled")
            lapse(row)  # the first delivery stalls past its lease here...
            outcomes.append(worker.run_eval_case(row.pk))  # ...and a second delivery runs the case

    interpose(monkeypatch, stall_then_lose_the_case)
    first = worker.run_eval_case(row.pk)  # wakes up: its next checkpoint write is fenced out
    assert (first, outcomes) == (None, ["stalled", "passed"])
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("passed", 2)
    assert [t for t, _ in tool_calls] == ["lookup_order", "issue_refund"]  # each once, by whoever ran it


def test_it_counts_each_case_once_however_often_it_is_delivered(
    project: Project, owner: User, sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    during: list[str | None] = []
    interpose(monkeypatch, lambda call: during.append(worker.run_eval_case(row.pk)) if not during else None)
    assert worker.run_eval_case(row.pk) == "passed"
    assert worker.run_eval_case(row.pk) is None
    assert during == [None]  # a duplicate delivery while it ran claimed nothing
    assert shared.counts_of(ev)["passed"] == 1 and EvalCase.objects.filter(eval=ev).count() == 1


def test_it_stops_a_running_case_when_its_eval_is_cancelled(
    project: Project, owner: User, sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = start(project, owner)
    first = EvalCase.objects.filter(eval=ev).order_by("pk").first()
    assert first is not None

    def cancel_during_the_first_call(call: ModelCall) -> None:
        if cancel_eval(ev):
            recovery.watcher().tick()  # the worker's watcher sees the cancel and sets the event

    interpose(monkeypatch, cancel_during_the_first_call)
    assert worker.run_eval_case(first.pk) == "cancelled"
    first.refresh_from_db()
    assert first.run_status == "cancelled" and first.model_calls == 1  # no call after the cancel
    assert set(EvalCase.objects.filter(eval=ev).values_list("status", flat=True)) == {"cancelled"}
    ev.refresh_from_db()
    assert ev.status == "cancelled" and ev.finished_at is not None and ev.summary is not None


def test_it_closes_a_case_delivered_after_its_eval_was_cancelled(
    project: Project, owner: User, sent: list[int]
) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(status="running", lease_owner="")  # re-sent, not yet claimed
    Eval.objects.filter(pk=ev.pk).update(status="cancelled")
    assert worker.run_eval_case(row.pk) == "cancelled"
    assert not RunCheckpoint.objects.exists()


def test_it_records_an_unreachable_model_as_an_error(
    project: Project, owner: User, sent: list[int], tmp_path: Path
) -> None:
    silent = scripted_endpoint(tmp_path, owner, {"nodes": {}})
    ev = start(project, owner, tags=["parse"], endpoints=[silent.pk])
    assert run_all(ev) == ["error"]
    row = EvalCase.objects.get(eval=ev)
    assert row.run_status == "failed" and "has no answer" in row.error


def test_it_records_a_pack_that_does_not_load_as_an_error(
    project: Project, owner: User, sent: list[int], settings: Any
) -> None:
    ev = start(project, owner, tags=["parse"])
    Eval.objects.filter(pk=ev.pk).update(version="0" * 40)
    assert run_all(ev) == ["error"]
    assert "0000000000" in EvalCase.objects.get(eval=ev).error


# -- the sweep and the watcher ------------------------------------------------------------------


def test_it_sends_again_a_case_whose_worker_died(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(
        status="running", attempts=1, lease_owner="dead", lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert recovery.sweep(idle=False)["resent"] == 1 and sent == [row.pk]
    assert recovery.sweep(idle=False)["resent"] == 0  # once per lease, not per sweep
    assert worker.run_eval_case(row.pk) == "passed"
    row.refresh_from_db()
    assert row.attempts == 2


def test_it_sends_queued_cases_again_when_nothing_has_moved(
    project: Project, owner: User, sent: list[int], settings: Any
) -> None:
    settings.PACKFORGE_WORK_STALL_S = 60.0
    ev = start(project, owner)
    assert recovery.sweep(idle=True)["resent"] == 0  # just started: its messages are on their way
    Eval.objects.filter(pk=ev.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert recovery.sweep(idle=False)["resent"] == 0  # this worker is busy: the queue is moving
    assert recovery.sweep(idle=True)["resent"] == ev.total
    assert recovery.sweep(idle=True)["resent"] == 0  # once per stall period


def test_it_leaves_queued_cases_alone_while_a_case_runs(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner)
    Eval.objects.filter(pk=ev.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    EvalCase.objects.filter(pk=EvalCase.objects.filter(eval=ev).first().pk).update(  # type: ignore[union-attr]
        status="running", lease_owner="alive", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert recovery.sweep(idle=True)["resent"] == 0


def test_it_closes_orphaned_cases_of_a_cancelled_eval(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(
        status="running", lease_owner="alive", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert cancel_eval(ev)
    row.refresh_from_db()
    assert row.status == "running"  # its worker is alive: it stops the run itself
    lapse(row)  # ...unless it died meanwhile
    assert recovery.sweep(idle=False)["closed"] == 1
    ev.refresh_from_db()
    assert (ev.status, ev.finished_at is not None) == ("cancelled", True)


def test_it_renews_the_lease_of_a_running_case(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    soon = timezone.now() + timedelta(seconds=1)
    EvalCase.objects.filter(pk=row.pk).update(status="running", lease_owner="me", lease_until=soon)
    active = recovery.watcher().register(row.pk, "me", ev.pk)
    try:
        recovery.watcher().renew([active])
    finally:
        recovery.watcher().unregister(row.pk)
    row.refresh_from_db()
    assert row.lease_until > soon and not active.lost and not active.cancel.is_set()


def test_it_stops_a_case_whose_lease_moved_to_another_worker(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    EvalCase.objects.filter(pk=row.pk).update(
        status="running", lease_owner="the-new-owner", lease_until=timezone.now() + timedelta(seconds=30)
    )
    active = recovery.watcher().register(row.pk, "me", ev.pk)
    try:
        recovery.watcher().renew([active])
    finally:
        recovery.watcher().unregister(row.pk)
    assert active.lost and active.cancel.is_set()


def test_it_refuses_a_pack_whose_own_model_is_a_real_server(project: Project, owner: User, sent: list[int]) -> None:
    from studio.projects.storage import PackRepo

    repo = PackRepo(project.repo_path)
    manifest = repo.files(prefix="pack/")["manifest.yaml"].decode()
    evil = manifest.replace(
        "model: fake:fakes/scripted.json", "model: openai:http://127.0.0.1:9/v1#m;key_env=SECRET_KEY"
    )
    head = repo.save(
        {"pack/manifest.yaml": evil.encode()}, base=project.head, author="olive", email="", message="point at a server"
    )
    with pytest.raises(EvalRefused, match="is not a scripted model"):
        start_eval(project, user=owner, version=head)
    assert not Eval.objects.exists() and sent == []
