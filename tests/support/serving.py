"""Serving test helpers (tests/studio/deployments/): support_triage's first scripted
ticket, scripted endpoints that answer it, some nodes changed (to make a tier fail), and
a run's event kinds in order, and the statement budgets of a served run (counted, not
timed: tests/studio/deployments/test_queries.py and test_walk_here.py hold them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.test.utils import CaptureQueriesContext

from studio.deployments.models import RunEvent, ServedRun
from studio.endpoints.models import Endpoint

SCRIPT = settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
TICKET: dict[str, Any] = json.loads(SCRIPT.read_text())["inputs"][0]["match"]


def scripted_tier(tmp_path: Path, staff: User, name: str, change: dict[str, Any] | None = None) -> Endpoint:
    """An endpoint answering support_triage's scripted tickets, with `change` (node ->
    answer; a string that is not JSON makes that node's answers unparsable)."""
    script = json.loads(SCRIPT.read_text())
    for entry in script["inputs"]:
        entry["answers"].update(change or {})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(script))
    return Endpoint.objects.create(name=name, spec=f"fake:{path}", created_by=staff)


def kinds(run: ServedRun) -> list[str]:
    """The kinds of `run`'s events, in their order."""
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))


# Transaction control (BEGIN / COMMIT on SQLite, SAVEPOINTs inside a test's transaction)
# is not counted: what is counted reads or writes rows.
CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")

# A five-step run: claim and read the row 2, the tiers' endpoints 1, begin 3 (the
# checkpoint, the highest event number, run.start + node.start), 3 a step (the fence
# check, the journal entry, its events; the end step has no event), settle 3 (the
# checkpoint's status, the row with its trace, run.end; whether there is a webhook is
# read from the row already read): 23, in 7 transactions. It was 46 in 17 when every
# event was its own transaction and the trace was rewritten after every step. The
# checkpoint and event writes are plain SQL (studio.sqlwrites), not fewer statements.
WORKER_MAX = 23
# Accept: the token, the deployment, the caller's role, the insert, and the answer's
# review-item lookup. The token's last_used_at is written at most once a minute.
ACCEPT_MAX = 5


def statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(CONTROL)]
