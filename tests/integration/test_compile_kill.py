"""Compiles on real Celery workers: a compile runs to its end; a compile whose worker is
SIGKILLed after attempt 1 finished is resumed by a new worker from attempt 2, without
planning, emitting or evaluating attempt 1 again; a cancelled compile stops.

Real components: `celery worker` subprocesses (tests/support/celery_workers.py) on the
test's database and broker, the refund_desk spec from git, the real compiler loop, a
recorded planner endpoint (plan documents replayed from files, set up as staff would)
and refund_desk's real tools, each call logged to a file and made slow (a window to kill
in). Attempt 1's plan routes approvals to `declined`, so it fails offline and the loop
re-plans; attempt 2's plan is the recorded refund_desk plan. The kill is placed, not
timed: the first worker dies once attempt 1's row exists and attempt 2's offline eval
has started calling tools."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.celery_workers import (
    ROOT,
    TOOL_LOG,
    TOOL_SLEEP,
    CeleryWorker,
    database_url,
    tool_log,
    wait_for,
    worker_pool,
)

SPEC = ROOT / "specs" / "refund_desk"


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    queue = f"it-compiles-{uuid.uuid4().hex[:10]}"
    settings.GIT_ROOT = tmp_path / "git"
    settings.PACKFORGE_TOOLS = "tests.support.celery_workers:REFUND_TOOLS"
    settings.PACKFORGE_COMPILE_ROOT = str(tmp_path / "compiles")
    settings.PACKFORGE_COMPILE_QUEUE = queue
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    env = {
        "DATABASE_URL": database_url(),
        "PACKFORGE_GIT_ROOT": str(settings.GIT_ROOT),
        "PACKFORGE_TOOLS": settings.PACKFORGE_TOOLS,
        "PACKFORGE_COMPILE_ROOT": settings.PACKFORGE_COMPILE_ROOT,
        "PACKFORGE_COMPILE_QUEUE": queue,
        TOOL_LOG: str(tmp_path / "tools.log"),
        TOOL_SLEEP: "0.2",
        # short leases and sweeps, so a dead worker's compile is sent again within seconds
        "PACKFORGE_WORK_LEASE_S": "2",
        "PACKFORGE_WORK_SWEEP_S": "0.5",
    }
    with worker_pool(queue, tmp_path, env, settings) as start:
        yield start


def _refunds(tmp_path: Path) -> tuple[Any, Any, Any]:
    """The refund_desk project (pack and spec), its author, and a recorded planner
    endpoint whose attempt 1 fails offline and attempt 2 is the recorded plan."""
    from django.contrib.auth.models import User

    from studio.endpoints.models import Endpoint
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    staff = User.objects.create_user("sam", "sam@example.com", "correct horse battery staple", is_staff=True)
    project = create_project(
        slug="refunds",
        name="Refunds",
        owner=owner,
        pack_files=example_files("refund_desk"),
        spec_files={p.name: p.read_bytes() for p in SPEC.iterdir() if p.is_file()},
        message="Create",
    )
    good = json.loads((SPEC / "plans" / "1.json").read_text())
    bad = json.loads(json.dumps(good))
    for edge in bad["edges"]:
        if edge["from"] == "approve" and edge.get("to") == "declined":
            edge["when"] = "decision == 'approve'"  # approvals declined: attempt 1 fails offline
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "1.json").write_text(json.dumps(bad))
    (plans / "2.json").write_text(json.dumps(good))
    planner = Endpoint.objects.create(name="recorded", spec=f"recorded:{plans}", created_by=staff)
    return project, owner, planner


def _compile(pk: int) -> Any:
    from studio.compiles.models import Compile

    return Compile.objects.get(pk=pk)


def test_it_compiles_a_spec_on_a_worker(workers: Callable[[str], CeleryWorker], tmp_path: Path) -> None:
    from studio.compiles.models import CompileAttempt
    from studio.compiles.start import start_compile

    project, owner, planner = _refunds(tmp_path)
    worker = workers("only")
    c = start_compile(project, user=owner, planner=planner, attempts=3)  # autocommit: sent at once

    wait_for("the compile to end", lambda: _compile(c.pk).is_final, [worker])

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.full_marks, c.attempts) == ("done", 2, True, 1), (
        c.error,
        worker.output()[-3000:],
    )
    rows = list(CompileAttempt.objects.filter(compile=c))
    assert [(a.number, a.status, a.offline_score == 1.0) for a in rows] == [(1, "ok", False), (2, "ok", True)]
    assert rows[0].failing_nodes and rows[1].pack_files is not None and "tools" in rows[1].pack_files["manifest.yaml"]


def test_it_resumes_a_killed_workers_compile_from_the_next_attempt(
    workers: Callable[[str], CeleryWorker], tmp_path: Path
) -> None:
    from studio.compiles.models import CompileAttempt
    from studio.compiles.shared import work_dir
    from studio.compiles.start import start_compile

    project, owner, planner = _refunds(tmp_path)
    first = workers("first")
    c = start_compile(project, user=owner, planner=planner, attempts=3)

    def in_attempt_two_eval() -> bool:
        now = _compile(c.pk)
        done = CompileAttempt.objects.filter(compile_id=c.pk, number=1).exists()
        calls = tool_log(tmp_path / "tools.log")
        return (
            done and (now.attempt, now.stage) == (2, "offline_eval") and bool(calls) and calls[-1]["event"] == "start"
        )

    wait_for("attempt 2's offline eval calling tools", in_attempt_two_eval, [first])
    first.kill()
    one = work_dir(c.pk) / "attempts" / "1"
    before = {p.relative_to(one): (p.stat().st_ino, p.stat().st_mtime_ns) for p in one.rglob("*") if p.is_file()}
    row_one = CompileAttempt.objects.get(compile_id=c.pk, number=1)
    killed = _compile(c.pk)
    assert killed.status == "running" and killed.attempts == 1
    assert not (work_dir(c.pk) / "attempts" / "2" / "attempt.json").exists()  # attempt 2 did not finish

    second = workers("second")
    wait_for("the compile to end", lambda: _compile(c.pk).is_final, [first, second])

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.full_marks, c.attempts) == ("done", 2, True, 2), (
        c.error,
        second.output()[-3000:],
    )
    rows = list(CompileAttempt.objects.filter(compile=c))
    assert [r.number for r in rows] == [1, 2]
    assert rows[0].pk == row_one.pk and rows[0].created_at == row_one.created_at  # attempt 1's row kept as it was
    after = {p.relative_to(one): (p.stat().st_ino, p.stat().st_mtime_ns) for p in one.rglob("*") if p.is_file()}
    assert after == before  # attempt 1 was not planned, emitted or evaluated again
    assert not (work_dir(c.pk) / "attempts" / "3").exists()
    second_pid = second.process.pid
    assert any(e["pid"] == second_pid for e in tool_log(tmp_path / "tools.log"))  # attempt 2 ran on the second
    assert "lost its worker" in second.output()


def test_it_stops_a_cancelled_compile(workers: Callable[[str], CeleryWorker], tmp_path: Path) -> None:
    from studio.compiles.models import CompileAttempt
    from studio.compiles.shared import work_dir
    from studio.compiles.start import cancel_compile, start_compile

    project, owner, planner = _refunds(tmp_path)
    worker = workers("only")
    c = start_compile(project, user=owner, planner=planner, attempts=3)

    def in_attempt_one_eval() -> bool:
        now = _compile(c.pk)
        return (now.attempt, now.stage) == (1, "offline_eval") and bool(tool_log(tmp_path / "tools.log"))

    wait_for("attempt 1's offline eval", in_attempt_one_eval, [worker])
    assert cancel_compile(_compile(c.pk))
    wait_for("the compile to end", lambda: _compile(c.pk).is_final, [worker])

    c.refresh_from_db()
    assert (c.status, c.stage, c.full_marks) == ("cancelled", "cancelled", False), (c.error, worker.output()[-3000:])
    assert list(CompileAttempt.objects.filter(compile=c).values_list("number", flat=True)) == [1]
    assert not (work_dir(c.pk) / "attempts" / "2").exists()  # the loop stopped before re-planning
