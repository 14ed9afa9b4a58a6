"""An eval survives a SIGKILLed worker: every case completes once a worker is back, no
tool call runs twice for the same run and node, and no case is counted twice.

Real components throughout: a `celery worker` subprocess (threads pool) on the test's
own database and broker (tests/integration/conftest.py: a file-based SQLite test
database and the filesystem broker by default; the harness's Postgres and Redis under
`scripts/with-services`), the refund_desk example pack from git, and its host tools,
registered for the worker through PACKFORGE_TOOLS (tests/support/celery_workers.py
`REFUND_TOOLS`: the real tools, each real call logged to a file the test reads).

The kill is placed, not timed: the first worker runs one case at a time, and is killed
while a case sits inside its second tool call (`issue_refund`), after its first one
(`lookup_order`) was journaled. So the log tells exactly which tool calls completed,
and the resumed case must replay `lookup_order` from its checkpoint, not call it again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.support.eval_workers import EvalWorker, tool_log, wait_for


def test_it_completes_every_case_once_after_its_worker_is_killed(
    workers: Callable[[str, int], EvalWorker], tmp_path: Path
) -> None:
    from django.contrib.auth.models import User

    from studio.evals import shared
    from studio.evals.models import Eval, EvalCase
    from studio.evals.start import start_eval
    from studio.projects.models import create_project
    from studio.projects.views import example_files
    from studio.work.models import JournalEntry

    owner = User.objects.create_user("olive", "olive@example.com", "correct horse battery staple")
    project = create_project(
        slug="refunds",
        name="Refund desk",
        owner=owner,
        pack_files=example_files("refund_desk"),
        message="Create from example",
    )
    first = workers("first", 1)  # one case at a time: the kill lands at a known point
    ev = start_eval(project, user=owner, repeats=2)[0]  # 36 case runs, sent on commit

    def mid_refund() -> bool:
        """Some cases are done, and the one in hand is inside issue_refund (its lookup is journaled)."""
        events = tool_log(tmp_path)
        open_refund = events and events[-1]["event"] == "start" and events[-1]["tool"] == "issue_refund"
        return bool(open_refund) and EvalCase.objects.filter(eval=ev, status="passed").count() >= 4

    wait_for("a case inside issue_refund", mid_refund, [first])
    first.kill()
    killed_at = tool_log(tmp_path)[-1]
    in_hand = EvalCase.objects.get(eval=ev, status="running")
    assert JournalEntry.objects.filter(run_id=in_hand.run_id, kind="tool", node="lookup").exists()

    second = workers("second", 3)
    wait_for("the eval to end", lambda: Eval.objects.get(pk=ev.pk).status == "done", [first, second])

    ev.refresh_from_db()
    rows = list(EvalCase.objects.filter(eval=ev))
    # every case completed, each exactly once
    assert len(rows) == ev.total == 36
    assert Counter(r.status for r in rows) == Counter({"passed": 36}), [(r.case_id, r.status, r.error) for r in rows]
    assert shared.counts_of(ev)["finished"] == 36 and ev.summary["counts"]["passed"] == 36
    # the killed case resumed from its checkpoint: lookup replayed, the refund done by the second worker
    resumed = EvalCase.objects.get(pk=in_hand.pk)
    assert resumed.attempts == 2
    calls = {c["tool"]: c for c in resumed.trace["tool_calls"]}
    assert calls["lookup_order"]["replayed"] and not calls["issue_refund"]["replayed"]
    # no tool call completed twice: the completed calls in the log are exactly the traces' calls
    done = Counter(
        (e["tool"], json.dumps(e["args"], sort_keys=True)) for e in tool_log(tmp_path) if e["event"] == "done"
    )
    traced = Counter((c["tool"], json.dumps(c["args"], sort_keys=True)) for r in rows for c in r.trace["tool_calls"])
    assert done == traced
    assert killed_at["tool"] == "issue_refund" and killed_at["pid"] == first.process.pid
    # and no step of any run was journaled twice
    steps = Counter(
        JournalEntry.objects.filter(run__run_id__startswith=f"eval{ev.pk}-", kind="step").values_list("run_id", "step")
    )
    assert steps and max(steps.values()) == 1
