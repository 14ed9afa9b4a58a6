from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.accounts.models import ApiToken
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import start, worker
from studio.runs.models import TryRun
from studio.runs.windows import window
from tests.support.studio import REJECTED_TEXT

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]
TICKET = {
    "ticket": "Hi, I was charged TWICE for order ORD-48213 ($59.98 each time). I want one of the charges "
    "reversed today or I'm disputing it with my bank."
}


def bearer(user: User) -> dict[str, str]:
    _, token = ApiToken.issue(user, "tests")
    return {"Authorization": f"Bearer {token}"}


def _post(user: User, **body: Any) -> Any:
    return Client().post(
        "/api/runs",
        {"project": "triage", "input": TICKET, **body},
        content_type="application/json",
        headers=bearer(user),
    )


def test_it_starts_a_run(owner: User, project: Project, django_capture_on_commit_callbacks: Capture) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        page = _post(owner)
    assert page.status_code == 201, page.content
    data = page.json()
    assert data["status"] == "queued" and data["version"] == project.head and data["final"] is False
    assert len(callbacks) == 1 and TryRun.objects.get().pk == data["id"]


def test_it_starts_a_run_on_a_named_endpoint_and_version_prefix(
    owner: User, project: Project, scripted: Endpoint
) -> None:
    page = _post(owner, endpoint="scripted", version=project.head[:8])
    assert page.status_code == 201
    assert page.json()["endpoint"] == "scripted" and page.json()["version"] == project.head


def test_it_gets_a_run_with_its_steps(
    owner: User, project: Project, eager: None, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run_id = _post(owner).json()["id"]
    page = Client().get(f"/api/runs/{run_id}", headers=bearer(owner))
    assert page.status_code == 200
    data = page.json()
    assert data["status"] == "done" and data["final"] and data["output"]["priority"] == "p1"
    assert [s["node"] for s in data["steps"]][-1] == "billing_ops"


def test_it_shows_rejected_text_to_authors_only(
    owner: User, reviewer: User, viewer: User, project: Project, stumbling: Endpoint
) -> None:
    run = start.new_try_run(project, user=owner, version=None, endpoint=stumbling, input=TICKET)
    worker.run_try(run.pk)
    as_owner = Client().get(f"/api/runs/{run.pk}", headers=bearer(owner)).json()
    assert as_owner["steps"][0]["attempts"][0]["text"] == REJECTED_TEXT
    assert [a["text"] for a in as_owner["trace"]["attempts"] if not a["ok"]] == [REJECTED_TEXT]
    for reader in (reviewer, viewer):
        data = Client().get(f"/api/runs/{run.pk}", headers=bearer(reader)).json()
        first = data["steps"][0]["attempts"][0]
        assert (first["ok"], first["text"], first["hidden"]) == (False, "", True) and first["reason"]
        assert REJECTED_TEXT not in str(data)
        assert data["trace"]["attempts"][1]["text"] == '{"category": "billing"}'  # accepted text is not hidden


def test_it_refuses_an_unknown_version(owner: User, project: Project) -> None:
    page = _post(owner, version="deadbeef")
    assert page.status_code == 400 and "no version deadbeef" in page.json()["detail"]


def test_it_refuses_an_unknown_endpoint(owner: User, project: Project) -> None:
    page = _post(owner, endpoint="nope")
    assert page.status_code == 400 and page.json() == {"detail": "no endpoint named 'nope'"}


def test_it_refuses_input_that_is_not_an_object(owner: User, project: Project) -> None:
    page = _post(owner, input=["a ticket"])
    assert page.status_code == 422 and "detail" in page.json()
    assert not TryRun.objects.exists()


def test_it_refuses_a_body_that_is_not_json(owner: User, project: Project) -> None:
    page = Client().post(
        "/api/runs", '{"project": "triage", "input": ', content_type="application/json", headers=bearer(owner)
    )
    assert page.status_code in (400, 422) and "detail" in page.json()


def test_it_forbids_viewers_to_start_runs(viewer: User, project: Project) -> None:
    page = _post(viewer)
    assert page.status_code == 403 and "only authors" in page.json()["detail"]


def test_it_hides_projects_and_runs_from_strangers(owner: User, stranger: User, project: Project) -> None:
    assert _post(stranger).status_code == 404
    run = start.new_try_run(project, user=owner, version=None, endpoint=None, input=TICKET)
    page = Client().get(f"/api/runs/{run.pk}", headers=bearer(stranger))
    assert page.status_code == 404 and page.json() == {"detail": "Not found"}


def test_it_requires_authentication(project: Project) -> None:
    page = Client().post("/api/runs", {"project": "triage", "input": TICKET}, content_type="application/json")
    assert page.status_code == 401


def _trace(steps: int, stopped_inside: bool = False) -> dict[str, Any]:
    """A trace of `steps` committed steps, one attempt and one tool call each; with
    `stopped_inside`, an attempt of a step that never committed."""
    trace: dict[str, Any] = {
        "status": "running",
        "steps": [
            {"node": "n", "step": i, "status": "ok", "escalations": [{"step": i}] if i % 100 == 0 else []}
            for i in range(1, steps + 1)
        ],
        "attempts": [{"node": "n", "step": i, "attempt": 1, "ok": True, "text": "{}"} for i in range(1, steps + 1)],
        "tool_calls": [{"node": "n", "step": i, "tool": "t"} for i in range(1, steps + 1)],
        "path": ["n"] * steps,
        "escalations": [],
        "totals": {"steps": steps},
    }
    if stopped_inside:
        trace["attempts"].append({"node": "n", "step": steps + 1, "attempt": 1, "ok": False, "text": "x"})
    return trace


def test_a_window_holds_its_steps_and_only_their_attempts_and_tool_calls() -> None:
    full = _trace(450, stopped_inside=True)
    first, following = window(full, 0)
    assert [s["step"] for s in first["steps"]] == list(range(1, 201)) and following == 200
    assert [a["step"] for a in first["attempts"]] == list(range(1, 201))
    assert [c["step"] for c in first["tool_calls"]] == list(range(1, 201))
    # what is derived from every step follows the window; the run's totals stay whole
    assert len(first["path"]) == 200 and first["escalations"] == [{"step": 100}, {"step": 200}]
    assert first["totals"] == {"steps": 450}
    last, following = window(full, 400)
    assert [s["step"] for s in last["steps"]] == list(range(401, 451)) and following is None
    assert [a["step"] for a in last["attempts"]] == [*range(401, 451), 451]  # the step it stopped inside
    past, following = window(full, 999)
    assert past["steps"] == [] and [a["step"] for a in past["attempts"]] == [451] and following is None
    short = _trace(5)
    assert window(short, 0) == (short, None)  # a run within one window is answered whole


def test_a_long_runs_answer_is_one_window_and_pages_on(owner: User, project: Project) -> None:
    run = start.new_try_run(project, user=owner, version=None, endpoint=None, input=TICKET)
    TryRun.objects.filter(pk=run.pk).update(trace=_trace(450))
    first = Client().get(f"/api/runs/{run.pk}", headers=bearer(owner)).json()
    assert (first["steps_total"], first["steps_from"], first["next_steps_from"]) == (450, 0, 200)
    assert len(first["steps"]) == 200 and len(first["trace"]["attempts"]) == 200
    then = Client().get(f"/api/runs/{run.pk}?steps_from=400", headers=bearer(owner)).json()
    assert [s["step"] for s in then["steps"]] == list(range(401, 451)) and then["next_steps_from"] is None
    refused = Client().get(f"/api/runs/{run.pk}?steps_from=-1", headers=bearer(owner))
    assert refused.status_code == 422 and "steps_from" in refused.content.decode()


def _trace_reads(queries: CaptureQueriesContext) -> int:
    """Queries that read the trace column of the runs table."""
    column = re.compile(r'"runs_tryrun"\."trace"[ ,]')  # not "trace_rev"
    return sum(1 for q in queries if q["sql"].startswith("SELECT") and column.search(q["sql"]))


def test_a_poll_of_an_unchanged_trace_does_not_read_it_again(owner: User, project: Project) -> None:
    run = start.new_try_run(project, user=owner, version=None, endpoint=None, input=TICKET)
    TryRun.objects.filter(pk=run.pk).update(trace=_trace(450), trace_rev=F("trace_rev") + 1)
    headers = bearer(owner)
    with CaptureQueriesContext(connection) as first:
        got = Client().get(f"/api/runs/{run.pk}", headers=headers).json()
    assert got["steps_total"] == 450 and _trace_reads(first) == 1
    with CaptureQueriesContext(connection) as again:
        same = Client().get(f"/api/runs/{run.pk}", headers=headers).json()
    assert same["steps"] == got["steps"] and _trace_reads(again) == 0
    # the worker writes the trace again (and bumps its revision): the next poll reads it
    TryRun.objects.filter(pk=run.pk).update(trace=_trace(460), trace_rev=F("trace_rev") + 1)
    with CaptureQueriesContext(connection) as after:
        moved = Client().get(f"/api/runs/{run.pk}", headers=headers).json()  # the window cached before
    assert moved["steps_total"] == 460 and moved["next_steps_from"] == 200 and _trace_reads(after) == 1
