"""The compile worker (studio.compiles.worker.run_compile) around the loop's contract:
attempts become rows as they finish, the best one is recorded, a compile taken over
from a dead worker resumes after its last finished attempt, cancel stops it, a lost
lease writes nothing, a compile that keeps killing its workers is closed, and the
planner endpoint's calls hold slots of its global cap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runtime import Cancelled
from studio.compiles import recovery, shared, worker
from studio.compiles.models import Compile, CompileAttempt
from studio.compiles.shared import work_dir
from studio.compiles.start import cancel_compile, start_compile
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.work.slots import FileSlots
from tests.support.compile_stand_in import TWO_ATTEMPTS, FakePlanner, Scripted, StandIn, triage_pack


def started(project: Project, owner: User, **options: Any) -> Compile:
    return start_compile(project, user=owner, **options)


def test_it_records_each_attempt_and_the_best(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    c = started(project, owner)

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.full_marks, c.stage) == ("done", 2, True, "done")
    assert c.lease_owner == "" and c.finished_at is not None and c.tokens == 200
    rows = list(CompileAttempt.objects.filter(compile=c))
    assert [(a.number, a.status, a.offline_score, a.failing_nodes) for a in rows] == [
        (1, "ok", 0.6, ["prioritise"]),
        (2, "ok", 1.0, []),
    ]
    assert rows[0].plan == {"name": "support_triage", "attempt": 1}
    assert rows[0].pack_files is not None and "graph.yaml" in rows[0].pack_files
    offline = rows[0].evals["offline"]
    assert (offline["passed"], offline["total"]) == (9, 15)
    assert offline["blame"] == [{"node": "prioritise", "failures": 6, "share": 1.0}]
    assert fake.planned == [1, 2]


def test_it_hands_the_loop_the_spec_at_the_compiles_version(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    c = started(project, owner, attempts=1)
    repo = PackRepo(project.repo_path)
    repo.save(
        {"spec/spec.yaml": b"name: broken\n"}, base=repo.head(), author="Tess", email="t@x", message="Break the spec"
    )

    assert worker.run_compile(c.pk) == "done"

    call = fake.calls[0]
    assert call["spec"].name == "support_triage"  # read at the compile's version, not the head
    assert call["work"] == work_dir(c.pk) and call["attempts"] == 1 and call["target"] is None
    assert isinstance(call["planner"], FakePlanner) and call["planner"].name == "rules"
    assert fake.planned == [1]


def test_it_resumes_a_compile_after_its_last_finished_attempt(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Killed(BaseException):
        """What a SIGKILL looks like from inside: nothing after it runs."""

    def die() -> None:
        raise Killed

    script = [Scripted(0.6, ("prioritise",), triage_pack(), after=die), *TWO_ATTEMPTS[1:]]
    fake = stand_in(script)
    c = started(project, owner)
    with pytest.raises(Killed):
        worker.run_compile(c.pk)
    recovery.watcher().unregister(c.pk)
    c.refresh_from_db()
    assert c.status == "running" and c.attempts == 1
    first = (work_dir(c.pk) / "attempts" / "1" / "attempt.json").stat()
    # the lease lapses; the sweep of a live worker re-sends the compile
    Compile.objects.filter(pk=c.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    sent: list[int] = []
    monkeypatch.setattr(shared, "send", sent.extend)
    assert recovery.sweep(idle=True)["resent"] == 1
    assert sent == [c.pk]

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert (c.status, c.attempts, c.best_attempt) == ("done", 2, 2)
    assert fake.planned == [1, 2]  # attempt 1 was not planned again
    assert list(CompileAttempt.objects.filter(compile=c).values_list("number", flat=True)) == [1, 2]
    again = (work_dir(c.pk) / "attempts" / "1" / "attempt.json").stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


def test_it_stops_a_compile_an_author_cancels(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    holder: list[Compile] = []

    def author_cancels() -> None:
        assert cancel_compile(holder[0])
        recovery.watcher().check(recovery.watcher().snapshot())  # the watcher's next poll

    fake = stand_in([Scripted(0.6, ("prioritise",), triage_pack(), after=author_cancels), *TWO_ATTEMPTS[1:]])
    c = started(project, owner)
    holder.append(c)

    assert worker.run_compile(c.pk) == "cancelled"

    c.refresh_from_db()
    assert (c.status, c.stage, c.cancel_requested) == ("cancelled", "cancelled", True)
    assert fake.planned == [1]
    assert list(CompileAttempt.objects.filter(compile=c).values_list("number", flat=True)) == [1]


def test_it_cancels_a_queued_compile_before_it_runs(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    c = started(project, owner)
    assert cancel_compile(c) and c.status == "cancelled"

    assert worker.run_compile(c.pk) is None  # final: nothing to claim
    assert fake.planned == [] and not cancel_compile(c)


def test_it_writes_nothing_more_once_its_lease_moved(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    holder: list[Compile] = []

    def taken_over() -> None:
        Compile.objects.filter(pk=holder[0].pk).update(lease_owner="another-delivery")
        recovery.watcher().renew(recovery.watcher().snapshot())  # the watcher's next renewal sees it

    fake = stand_in([Scripted(0.6, ("prioritise",), triage_pack(), after=taken_over), *TWO_ATTEMPTS[1:]])
    c = started(project, owner)
    holder.append(c)

    assert worker.run_compile(c.pk) is None

    c.refresh_from_db()
    assert (c.status, c.lease_owner) == ("running", "another-delivery")
    assert fake.planned == [1]  # the loop was stopped: attempt 2 never planned
    assert not CompileAttempt.objects.filter(compile=c, number=2).exists()


def test_it_closes_a_compile_that_keeps_killing_its_workers(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn], settings: Any
) -> None:
    settings.PACKFORGE_COMPILE_MAX_CLAIMS = 2
    fake = stand_in(TWO_ATTEMPTS)
    c = started(project, owner)
    Compile.objects.filter(pk=c.pk).update(status="running", attempts=2, lease_owner="", lease_until=None)

    assert worker.run_compile(c.pk) == "failed"

    c.refresh_from_db()
    assert "killed its worker 2 times" in c.error and "PACKFORGE_COMPILE_MAX_CLAIMS=2" in c.error
    assert fake.planned == []


def test_it_fails_with_the_problems_of_a_spec_that_does_not_load(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in(TWO_ATTEMPTS)
    repo = PackRepo(project.repo_path)
    sha = repo.save(
        {"spec/spec.yaml": b"name: broken\n"}, base=repo.head(), author="Tess", email="t@x", message="Break the spec"
    )
    c = Compile.objects.create(project=project, version=sha, created_by=owner)

    assert worker.run_compile(c.pk) == "failed"

    c.refresh_from_db()
    assert c.error.startswith("the spec does not load:") and "spec.yaml" in c.error


def test_it_records_a_crash_of_the_loop_as_a_failed_compile(
    project: Project, owner: User, monkeypatch: pytest.MonkeyPatch, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in(TWO_ATTEMPTS)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the loop fell over")

    monkeypatch.setattr(worker, "build", broken)
    c = started(project, owner)

    assert worker.run_compile(c.pk) == "failed"
    c.refresh_from_db()
    assert c.error == "internal error: RuntimeError: the loop fell over" and c.lease_owner == ""


def test_it_keeps_an_attempt_that_did_not_emit_a_pack(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in([Scripted(0.0, (), None, status="plan_invalid"), *TWO_ATTEMPTS[1:]])
    c = started(project, owner)

    assert worker.run_compile(c.pk) == "done"

    first = CompileAttempt.objects.get(compile=c, number=1)
    assert (first.status, first.pack_files, first.offline_score) == ("plan_invalid", None, None)
    assert first.problems == ["nodes[1].writes: 'x' is not a spec output"]


# -- the planner endpoint and its cap ---------------------------------------------------------


def test_it_plans_with_the_endpoint_the_author_chose(
    project: Project, owner: User, staff: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    frontier = Endpoint.objects.create(
        name="frontier",
        spec="openai:http://127.0.0.1:9/v1#big",
        key_env="PACKFORGE_KEY_FRONTIER",
        concurrency=3,
        created_by=staff,
    )
    c = started(project, owner, planner=frontier)

    assert worker.run_compile(c.pk) == "done"

    planner = fake.calls[0]["planner"]
    assert isinstance(planner, worker.CappedPlanner)
    assert (planner.key, planner.limit) == (f"endpoint-{frontier.pk}", 3)
    # the key's variable comes from the endpoint row, never from the spec
    assert (
        planner.inner.name.startswith("openai:http://127.0.0.1:9/v1#big")
        and "key_env=PACKFORGE_KEY_FRONTIER" in planner.inner.name
    )


def test_it_holds_a_slot_of_the_planner_endpoints_cap_for_each_plan(tmp_path: Path) -> None:
    seen: list[int] = []
    slots = FileSlots(tmp_path / "slots")

    class Inner:
        name = "openai:http://x/v1#m"

        def plan(self, request: Any, cancel: threading.Event | None = None) -> str:
            seen.append(1)
            assert slots.try_acquire("endpoint-7", 1) is None  # the one slot is held by this call
            return "planned"

    capped = worker.CappedPlanner(Inner(), slots, "endpoint-7", 1)
    assert capped.plan(object()) == "planned" and seen == [1]

    held = slots.try_acquire("endpoint-7", 1)  # another worker's call holds the only slot
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        capped.plan(object(), cancel)
    assert seen == [1]  # the waiting plan never reached the endpoint
    assert held is not None
    slots.release(held)
