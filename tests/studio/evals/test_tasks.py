"""The eval tasks are thin: acknowledged late, redelivered when their worker is lost, one
call into the worker, a retry when the database is away; cases are sent after commit."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import Retry
from django.contrib.auth.models import User
from django.db import OperationalError

from studio.celery import app
from studio.evals import shared, tasks, worker
from studio.evals.models import EvalCase
from studio.projects.models import Project
from tests.support.studio import start

pytestmark = pytest.mark.django_db


def test_it_acks_late_and_is_redelivered_when_its_worker_is_lost() -> None:
    task = tasks.execute_eval_case
    assert (task.acks_late, task.reject_on_worker_lost, task.name) == (True, True, "evals.execute_eval_case")


def test_it_runs_the_case(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    row = EvalCase.objects.get(eval=ev)
    tasks.execute_eval_case.apply(args=(row.pk,))
    row.refresh_from_db()
    assert row.status == "passed"


def test_it_retries_when_the_database_is_away(monkeypatch: pytest.MonkeyPatch) -> None:
    def locked(case_pk: int) -> None:
        raise OperationalError("database is locked")

    retried: list[dict[str, Any]] = []

    def retry(**kwargs: Any) -> Exception:
        retried.append(kwargs)
        return Retry()

    monkeypatch.setattr(worker, "run_eval_case", locked)
    monkeypatch.setattr(tasks.execute_eval_case, "retry", retry)
    with pytest.raises(Retry):
        tasks.execute_eval_case.run(1)
    assert isinstance(retried[0]["exc"], OperationalError) and retried[0]["countdown"] >= 1


def test_it_sends_one_task_per_case_to_the_eval_queue(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PACKFORGE_EVAL_QUEUE = "evals"
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(
        tasks.execute_eval_case, "apply_async", lambda args, kwargs=None, **kw: calls.append((args, kw))
    )
    shared.enqueue_cases([3, 4])
    assert [(args, kw["queue"]) for args, kw in calls] == [((3,), "evals"), ((4,), "evals")]


def test_it_sends_nothing_before_the_rows_are_committed(
    project: Project, owner: User, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(shared, "enqueue_cases", sent.extend)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ev = start(project, owner, tags=["parse"])
        assert sent == []
    assert len(callbacks) == 1
    callbacks[0]()
    assert sent == list(EvalCase.objects.filter(eval=ev).values_list("pk", flat=True))


def test_it_runs_the_cases_inline_when_tasks_are_eager(project: Project, owner: User) -> None:
    saved = {k: app.conf[k] for k in ("task_always_eager", "task_eager_propagates")}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        ev = start(project, owner, tags=["parse"])
        shared.enqueue_cases(EvalCase.objects.filter(eval=ev).values_list("pk", flat=True))
    finally:
        app.conf.update(saved)
    ev.refresh_from_db()
    assert ev.status == "done" and not EvalCase.objects.filter(eval=ev, status__in=["queued", "running"]).exists()
