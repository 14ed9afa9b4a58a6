"""Compiles with a model planner endpoint on a real worker: the endpoint's global cap
holds across compiles (a compile waits for a slot rather than call the planner), and
cancelling stops the in-flight planner call.

A real worker process (threads pool, more threads than the cap) runs two compiles whose
planner is an `openai:` endpoint with a cap of 1, served by the fault-injecting
OpenAI-compatible server (tests/support/fault_server.py) with a latency far longer than
the test waits. Once one plan request is in flight and both compiles are planning, both
are cancelled, the waiting one first: each ends cancelled while the server still holds
the one request, which only happens if the waiting compile gave up its wait and the
worker dropped the request in flight (the watcher sets the loop's cancel Event; the
openai backend closes the stream)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.celery_workers import ROOT, CeleryWorker, database_url, wait_for
from tests.support.fault_server import FaultServer

LATENCY_S = 60.0
SPEC = ROOT / "specs" / "support_triage"


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[CeleryWorker]:
    from studio.celery import app

    queue = f"it-compiles-{uuid.uuid4().hex[:10]}"
    settings.GIT_ROOT = tmp_path / "git"
    settings.PACKFORGE_COMPILE_ROOT = str(tmp_path / "compiles")
    settings.PACKFORGE_COMPILE_QUEUE = queue
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    env = {
        "DATABASE_URL": database_url(),
        "PACKFORGE_GIT_ROOT": str(settings.GIT_ROOT),
        "PACKFORGE_COMPILE_ROOT": settings.PACKFORGE_COMPILE_ROOT,
        "PACKFORGE_COMPILE_QUEUE": queue,
        "PACKFORGE_WORK_POLL_S": "0.1",
    }
    if getattr(settings, "REDIS_URL", ""):
        env["REDIS_URL"] = settings.REDIS_URL
    saved_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    running = CeleryWorker("planner", queue, tmp_path / "worker.log", env, pool="threads", concurrency=3)
    try:
        running.wait_ready()
        yield running
    finally:
        app.conf.task_default_queue = saved_queue
        running.stop()


def test_it_caps_and_cancels_planner_calls(worker: CeleryWorker, tmp_path: Path) -> None:
    from django.contrib.auth.models import User

    from studio.compiles.models import Compile
    from studio.compiles.start import cancel_compile, start_compile
    from studio.endpoints.models import Endpoint
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    staff = User.objects.create_user("sam", "sam@example.com", "correct horse battery staple", is_staff=True)
    project = create_project(
        slug="triage",
        name="Support triage",
        owner=owner,
        pack_files=example_files("support_triage"),
        spec_files={p.name: p.read_bytes() for p in SPEC.iterdir() if p.is_file()},
        message="Create",
    )
    with FaultServer(latency=LATENCY_S) as server:
        frontier = Endpoint.objects.create(
            name="frontier", spec=f"openai:{server.base_url}#fault", concurrency=1, created_by=staff
        )
        first = start_compile(project, user=owner, planner=frontier, attempts=1)
        wait_for("the first compile's plan request", lambda: len(server.completions()) == 1, [worker])
        second = start_compile(project, user=owner, planner=frontier, attempts=1)
        wait_for("the second compile planning", lambda: Compile.objects.get(pk=second.pk).stage == "plan", [worker])

        # the second compile waits for the endpoint's one slot; cancelled, it stops waiting
        assert cancel_compile(Compile.objects.get(pk=second.pk))
        wait_for("the waiting compile to end", lambda: Compile.objects.get(pk=second.pk).is_final, [worker])
        assert len(server.completions()) == 1  # it never reached the planner
        # the first compile's plan request is in flight; cancelled, the worker drops it
        assert cancel_compile(Compile.objects.get(pk=first.pk))
        wait_for("the planning compile to end", lambda: Compile.objects.get(pk=first.pk).is_final, [worker])
        answered = [r for r in server.completions() if r.outcome == "ok"]
        assert len(server.completions()) == 1 and answered == []  # dropped, not waited for
        assert server.max_in_flight == 1

    compiles = [first, second]
    for c in compiles:
        c.refresh_from_db()
        assert (c.status, c.stage, c.best_attempt) == ("cancelled", "cancelled", None), (
            c.error,
            worker.output()[-3000:],
        )
