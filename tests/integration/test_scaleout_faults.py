"""The scale-out configuration under faults: Redis restarted and Postgres restarted (a
crash: `pg_ctl stop -m immediate`) while an eval runs on two Celery workers; the eval
completes, every case is counted once, and both workers live through it.

The test brings its own Postgres and Redis (tests/support/services.py), whatever the
suite runs on, because it restarts them: it cannot share the suite's. So the studio side
(migrate, create the project, start the eval, read the outcome) runs in `manage.py`
subprocesses on that Postgres, as a web process would, and the test polls the eval's
rows with plain SQL between them (a connection per poll, so the restarts cannot break
the test's own reads). Redis keeps nothing on disk here: its restart loses every queued
message, and the workers' sweep must send those cases again (studio/evals/recovery.py).

The faults are placed, not timed: Redis restarts once four cases have passed; Postgres
crashes once more cases have passed after that than the workers had in flight (so some
were sent again and ran) and while cases run; the eval is checked each time to still
have cases left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import services
from tests.support.celery_workers import ROOT
from tests.support.eval_workers import TOOLS_REF, EvalWorker, tool_log, wait_for

REPEATS = 3  # 18 refund_desk cases x 3: 54 case runs
THREADS = 2  # per worker; two workers


@dataclass
class Stack:
    postgres: services.Postgres
    redis: services.Redis
    env: dict[str, str]
    folder: Path

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)[:80]} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def python(self, code: str) -> Any:
        """Run `code` in a Django shell on the stack; it prints one JSON value last."""
        return json.loads(self.manage("shell", "-c", code).strip().splitlines()[-1])


def _installed() -> None:
    try:
        services.postgres_bin()
    except services.ServiceError as exc:
        pytest.skip(f"this test starts its own Postgres: {exc}")
    if shutil.which("redis-server") is None:
        pytest.skip("this test starts its own Redis: apt-get install redis-server")


@pytest.fixture
def stack(tmp_path: Path, settings: Any) -> Iterator[Stack]:
    _installed()
    queue = f"it-faults-{uuid.uuid4().hex[:10]}"
    with services.postgres() as pg, services.redis() as rd:
        env = {
            **os.environ,
            "DATABASE_URL": pg.url,
            "REDIS_URL": rd.url,
            "PACKFORGE_GIT_ROOT": str(tmp_path / "git"),
            "PACKFORGE_EVAL_QUEUE": queue,
            "PACKFORGE_TOOLS": TOOLS_REF,
            "CELERY_TASK_ALWAYS_EAGER": "false",
        }
        # what EvalWorker reads from the test process's settings: this stack, not the suite's
        settings.REDIS_URL = rd.url
        running = Stack(pg, rd, env, tmp_path)
        running.manage("migrate", "--no-input", "-v", "0")
        yield running


def _rows(pg: services.Postgres, eval_pk: int) -> tuple[str, Counter[str]] | None:
    """The eval's status and its cases per status, or None while Postgres is away."""
    import psycopg

    try:
        with psycopg.connect(pg.url, connect_timeout=2) as conn:
            status = conn.execute("SELECT status FROM evals_eval WHERE id = %s", (eval_pk,)).fetchone()
            cases = conn.execute(
                "SELECT status, count(*) FROM evals_evalcase WHERE eval_id = %s GROUP BY status", (eval_pk,)
            ).fetchall()
    except psycopg.OperationalError:
        return None
    assert status is not None
    return str(status[0]), Counter({str(s): int(n) for s, n in cases})


START = """
import json
import os
from django.contrib.auth.models import User
from studio.evals.start import start_eval
from studio.projects.models import create_project
from studio.projects.views import example_files
owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
project = create_project(slug="refunds", name="Refund desk", owner=owner,
                         pack_files=example_files("refund_desk"), message="Create from example")
ev = start_eval(project, user=owner, repeats=%d)[0]
print(json.dumps(ev.pk))
"""

OUTCOME = """
import json
import os
from collections import Counter
from studio.evals import shared
from studio.evals.models import Eval, EvalCase
from studio.work.models import JournalEntry
ev = Eval.objects.get(pk=%d)
rows = list(EvalCase.objects.filter(eval=ev))
steps = Counter(JournalEntry.objects.filter(run__run_id__startswith=f"eval{ev.pk}-", kind="step")
                .values_list("run_id", "step"))
print(json.dumps({
    "status": ev.status, "total": ev.total, "counts": shared.counts_of(ev), "summary": ev.summary["counts"],
    "rows": [[r.case_id, r.repeat, r.status, r.attempts, r.error] for r in rows],
    "calls": [[c["tool"], json.dumps(c["args"], sort_keys=True)] for r in rows for c in (r.trace or {}).get("tool_calls", [])],
    "most_journaled": max(steps.values(), default=0),
}))
"""


def test_it_completes_every_case_once_through_a_redis_and_a_postgres_restart(stack: Stack) -> None:
    queue = stack.env["PACKFORGE_EVAL_QUEUE"]
    started: list[EvalWorker] = []

    def worker(name: str) -> EvalWorker:
        w = EvalWorker(name, queue, stack.folder, Path(stack.env["PACKFORGE_GIT_ROOT"]), THREADS, stack.postgres.url)
        started.append(w)
        w.wait_ready()
        return w

    try:
        workers = [worker("one"), worker("two")]
        eval_pk = int(stack.python(START % REPEATS))
        total = 18 * REPEATS

        def passed_at_least(n: int, running: int = 0) -> Callable[[], bool]:
            def check() -> bool:
                got = _rows(stack.postgres, eval_pk)
                return got is not None and got[1]["passed"] >= n and got[1]["running"] >= running

            return check

        def still_running() -> int:
            got = _rows(stack.postgres, eval_pk)
            assert got is not None
            status, cases = got
            assert status != "done" and cases["passed"] < total, "the eval ended before the fault"
            return cases["passed"]

        wait_for("four cases passed", passed_at_least(4), workers)
        still_running()
        stack.redis.restart()  # every queued message is lost with it
        # more than the cases in flight at the restart (2 workers x 2 threads): some case
        # was sent again and ran after Redis came back; then crash Postgres under running cases
        after_redis = still_running() + THREADS * 2 + 1
        wait_for("cases passed after Redis came back", passed_at_least(after_redis, running=2), workers)
        before_crash = still_running()
        stack.postgres.restart()
        wait_for("cases passed after Postgres came back", passed_at_least(before_crash + THREADS * 2 + 1), workers)

        def done() -> bool:
            got = _rows(stack.postgres, eval_pk)
            return got is not None and got[0] == "done"

        wait_for("the eval to end", done, workers)
        for w in workers:
            assert w.process.poll() is None, f"worker {w.log.name} died:\n{w.output()[-4000:]}"
    finally:
        for w in started:
            w.stop()

    outcome = stack.python(OUTCOME % eval_pk)
    rows = outcome["rows"]
    # every case run completed, each exactly once
    assert outcome["status"] == "done" and outcome["total"] == total == len(rows)
    assert len({(case, repeat) for case, repeat, *_ in rows}) == total
    assert Counter(status for _, _, status, _, _ in rows) == Counter({"passed": total}), rows
    assert outcome["counts"]["finished"] == total and outcome["summary"]["passed"] == total
    # no step of any run was journaled twice, and every traced tool call really ran
    assert outcome["most_journaled"] == 1
    done_calls = Counter(
        (e["tool"], json.dumps(e["args"], sort_keys=True)) for e in tool_log(stack.folder) if e["event"] == "done"
    )
    traced = Counter((tool, args) for tool, args in outcome["calls"])
    assert traced and not traced - done_calls
