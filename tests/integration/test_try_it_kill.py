"""A try-it run survives a SIGKILLed worker: the run finishes once a worker is back, from
its database checkpoint, and no tool call completes twice.

Real components: two `celery worker` subprocesses in turn (tests/support/celery_workers.py)
on the test's database and broker, the refund_desk example from git, its real tools
(each call logged to a file). The kill is placed, not timed: the first worker is killed
while the run sits inside its second tool call (`issue_refund`), after `lookup_order`
was journaled. The broker may lose the message with the worker (the filesystem broker
does); the second worker's sweep sends the run again once its lease lapses."""

from __future__ import annotations

import json
import uuid
from collections import Counter
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

MESSAGE = json.loads((ROOT / "packs" / "refund_desk" / "evalset.jsonl").read_text().splitlines()[0])["input"]


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    queue = f"it-runs-{uuid.uuid4().hex[:10]}"
    settings.GIT_ROOT = tmp_path / "git"
    settings.PACKFORGE_TOOLS = "tests.support.celery_workers:REFUND_TOOLS"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    env = {
        "DATABASE_URL": database_url(),
        "PACKFORGE_GIT_ROOT": str(settings.GIT_ROOT),
        "PACKFORGE_TOOLS": settings.PACKFORGE_TOOLS,
        TOOL_LOG: str(tmp_path / "tools.log"),
        TOOL_SLEEP: "0.5",
        "PACKFORGE_RUN_QUEUE": queue,
        # short leases and sweeps, so a dead worker's run is sent again within seconds
        "PACKFORGE_WORK_LEASE_S": "2",
        "PACKFORGE_WORK_SWEEP_S": "0.5",
    }
    with worker_pool(queue, tmp_path, env, settings) as start:
        yield start


def test_it_finishes_a_try_it_run_after_its_worker_is_killed(
    workers: Callable[[str], CeleryWorker], tmp_path: Path
) -> None:
    from django.contrib.auth.models import User

    from studio.endpoints.models import Endpoint
    from studio.projects.models import create_project
    from studio.projects.views import example_files
    from studio.runs import start
    from studio.runs.models import TryRun
    from studio.runs.tasks import execute_try_run
    from studio.work.models import JournalEntry

    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    staff = User.objects.create_user("sam", "sam@example.com", "correct horse battery staple", is_staff=True)
    project = create_project(
        slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"), message="Create"
    )
    # the pack's own script answers by case id; a try-it run needs one that answers its input
    script = json.loads((ROOT / "packs" / "refund_desk" / "fakes" / "scripted.json").read_text())
    (tmp_path / "refunder.json").write_text(
        json.dumps({"inputs": [{"match": MESSAGE, "answers": script["cases"]["rd-01"]}]})
    )
    endpoint = Endpoint.objects.create(name="refunder", spec=f"fake:{tmp_path / 'refunder.json'}", created_by=staff)

    first = workers("first")
    run = start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input=MESSAGE)
    execute_try_run.delay_on_commit(run.pk)  # autocommit: sent at once

    def in_refund() -> bool:
        events = tool_log(tmp_path / "tools.log")
        return bool(events) and events[-1]["event"] == "start" and events[-1]["tool"] == "issue_refund"

    wait_for("the run inside issue_refund", in_refund, [first])
    first.kill()
    run.refresh_from_db()
    assert run.status == "running" and run.attempts == 1
    assert JournalEntry.objects.filter(run_id=f"try-{run.pk}", kind="tool", node="lookup").exists()

    second = workers("second")
    wait_for("the run to end", lambda: TryRun.objects.get(pk=run.pk).is_final, [first, second])

    run.refresh_from_db()
    assert run.status == "done", (run.error, second.output()[-3000:])
    assert run.output is not None and run.output["refund_id"] == "R-ORD-10001"
    assert run.attempts == 2 and run.lease_owner == ""
    calls = {c["tool"]: c for c in run.trace["tool_calls"]}
    assert calls["lookup_order"]["replayed"] and not calls["issue_refund"]["replayed"]
    done = Counter(e["tool"] for e in tool_log(tmp_path / "tools.log") if e["event"] == "done")
    assert done == Counter({"lookup_order": 1, "issue_refund": 1})  # each tool call completed once
    assert "lost its worker" in second.output()
