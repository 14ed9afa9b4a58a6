"""The runs API on a real pack and scripted endpoints, tasks inline: submit (idempotent
on run_id), the result and its steps, escalation to the next tier, waiting for a person
and resuming exactly once, cancel, filters, the event stream, the webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.deployments import service
from studio.deployments.models import Deployment, RunEvent, ServedRun
from studio.deployments.signals import run_waiting
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from tests.support.serving import TICKET, kinds, scripted_tier
from tests.support.studio import send

pytestmark = pytest.mark.usefixtures("eager")


def submit(client: Client, name: str, body: dict[str, Any], capture: Any, wait: str = "") -> Any:
    with capture(execute=True):
        response = send(client, "post", f"/api/deployments/{name}/runs{wait}", body)
    return response


def test_it_runs_a_submitted_run_to_its_output(
    as_owner: Client, deployment: Deployment, django_capture_on_commit_callbacks: Any
) -> None:
    response = submit(as_owner, deployment.name, {"run_id": "t-1", "input": TICKET}, django_capture_on_commit_callbacks)
    assert response.status_code == 202, response.content
    got = as_owner.get(f"/api/deployments/{deployment.name}/runs/t-1").json()
    assert got["status"] == "done" and got["final"]
    assert got["output"]["priority"] == "p1" and got["tier"] == "large"
    assert [s["node"] for s in got["steps"]] == ["classify", "extract", "sentiment", "prioritise", "billing_ops"]
    assert all(s["tier"] == "large" for s in got["steps"][:4])
    assert got["steps"][0]["attempts"] and got["steps"][0]["output"] == {"category": "billing"}
    run = ServedRun.objects.get(run_id="t-1")
    assert kinds(run) == [
        "run.start",
        "node.start",
        "model.call",
        "node.start",
        "model.call",
        "node.start",
        "model.call",
        "node.start",
        "model.call",
        "node.start",
        "run.end",
    ]
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == list(range(1, 12))


def test_it_answers_a_duplicate_submit_with_the_same_run_and_refuses_other_input(
    as_owner: Client, deployment: Deployment, django_capture_on_commit_callbacks: Any
) -> None:
    first = submit(as_owner, deployment.name, {"run_id": "dup", "input": TICKET}, django_capture_on_commit_callbacks)
    again = submit(as_owner, deployment.name, {"run_id": "dup", "input": TICKET}, django_capture_on_commit_callbacks)
    other = submit(
        as_owner, deployment.name, {"run_id": "dup", "input": {"ticket": "else"}}, django_capture_on_commit_callbacks
    )
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["status"] == "done"
    assert other.status_code == 409 and "another input" in other.json()["detail"]
    assert ServedRun.objects.filter(run_id="dup").count() == 1
    assert kinds(ServedRun.objects.get(run_id="dup")).count("run.start") == 1


def test_it_answers_with_the_result_when_asked_to_wait(
    transactional_db: None, as_owner: Client, deployment: Deployment
) -> None:
    # autocommit: the run is sent (and, tasks inline, run) when its row is saved
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs?wait=5", {"input": TICKET})
    assert response.status_code == 200
    assert response.json()["status"] == "done" and len(response.json()["run_id"]) == 32


def test_it_refuses_input_that_is_not_an_object_and_a_bad_run_id(as_owner: Client, deployment: Deployment) -> None:
    bad_id = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "a/b", "input": {}})
    assert bad_id.status_code == 400 and "run_id" in bad_id.json()["detail"]
    for dots in (".", ".."):  # a URL path folds them: the run's page would be another page
        refused = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": dots, "input": {}})
        assert refused.status_code == 400, dots
    not_object = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"input": [1]})
    assert not_object.status_code == 422


def test_it_escalates_a_node_to_the_next_tier(
    as_owner: Client,
    project: Project,
    owner: User,
    broken: Endpoint,
    good: Endpoint,
    django_capture_on_commit_callbacks: Any,
) -> None:
    service.create_deployment(project, user=owner, name="ladder", version=None, tiers=[broken.pk, good.pk])
    submit(as_owner, "ladder", {"run_id": "e-1", "input": TICKET}, django_capture_on_commit_callbacks)
    got = as_owner.get("/api/deployments/ladder/runs/e-1").json()
    assert got["status"] == "done" and got["tier"] == "large"
    classify = got["steps"][0]
    assert classify["tier"] == "large"
    assert classify["escalations"][0]["from"] == "small" and classify["escalations"][0]["to"] == "large"
    run = ServedRun.objects.get(run_id="e-1")
    events = list(RunEvent.objects.filter(run=run).order_by("seq"))
    escalated = [e for e in events if e.kind == "escalated"]
    assert [e.data["node"] for e in escalated] == ["classify", "extract"]
    rejected = [e for e in events if e.kind == "attempt.rejected"]
    assert rejected and all(e.data["tier"] == "small" for e in rejected)
    calls = [e.data["tier"] for e in events if e.kind == "model.call" and e.data["node"] == "classify"]
    assert calls[0] == "small" and calls[-1] == "large"
    assert as_owner.get("/api/deployments/ladder/runs?node=classify&tier=large").json()[0]["run_id"] == "e-1"


def test_it_waits_for_a_person_past_the_last_tier_and_resumes_exactly_once(
    as_owner: Client,
    project: Project,
    owner: User,
    broken: Endpoint,
    django_capture_on_commit_callbacks: Any,
) -> None:
    waited: list[ServedRun] = []

    def heard(sender: Any, run: ServedRun, **_: Any) -> None:
        waited.append(run)

    run_waiting.connect(heard)
    try:
        service.create_deployment(project, user=owner, name="small-only", version=None, tiers=[broken.pk])
        submit(as_owner, "small-only", {"run_id": "w-1", "input": TICKET}, django_capture_on_commit_callbacks)
    finally:
        run_waiting.disconnect(heard)
    run = ServedRun.objects.get(run_id="w-1")
    # classify has an on_fail edge (manual_triage): taken past the last tier, no wait.
    assert run.status == "done" and run.output is not None and run.trace["end_node"] == "manual_triage"
    assert not waited


def test_it_resumes_a_waiting_run_with_a_persons_answer_once(
    as_owner: Client,
    project: Project,
    owner: User,
    tmp_path: Any,
    staff: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    weak = scripted_tier(tmp_path, staff, "weak", {"extract": "not json"})
    service.create_deployment(project, user=owner, name="weak", version=None, tiers=[weak.pk])
    waited: list[ServedRun] = []

    def heard(sender: Any, run: ServedRun, **_: Any) -> None:
        waited.append(run)

    run_waiting.connect(heard)
    try:
        submit(as_owner, "weak", {"run_id": "w-2", "input": TICKET}, django_capture_on_commit_callbacks)
    finally:
        run_waiting.disconnect(heard)
    run = ServedRun.objects.get(run_id="w-2")
    assert run.status == "waiting" and run.waiting_at == "extract" and run.waiting_reason == "escalated"
    assert run.tier == ""  # nobody has settled it yet; "person" once a person answers (below)
    assert [r.pk for r in waited] == [run.pk]
    assert run.state is not None and run.state["category"] == "billing" and run.state["input"] == TICKET
    assert run.trace["steps"][-1]["status"] == "wait"
    answer = {"order_id": "ORD-48213", "amount_usd": 59.98}
    with django_capture_on_commit_callbacks(execute=True):
        assert service.resume_served_run(run, "extract", answer, owner)
    assert not service.resume_served_run(run.pk, "extract", answer, owner)  # the second decision loses
    run.refresh_from_db()
    assert run.status == "done" and run.output is not None and run.output["order_id"] == "ORD-48213"
    assert run.tier == "person"
    extract = next(s for s in run.trace["steps"] if s["node"] == "extract" and s["status"] == "ok")
    assert extract["provenance"] == "human:olive"
    assert kinds(run).count("review.decided") == 1 and kinds(run)[-1] == "run.end"


def test_it_ends_a_rejected_waiting_run_failed(
    as_owner: Client, project: Project, owner: User, tmp_path: Any, staff: User, django_capture_on_commit_callbacks: Any
) -> None:
    weak = scripted_tier(tmp_path, staff, "weak", {"extract": "not json"})
    service.create_deployment(project, user=owner, name="weak", version=None, tiers=[weak.pk])
    submit(as_owner, "weak", {"run_id": "r-1", "input": TICKET}, django_capture_on_commit_callbacks)
    run = ServedRun.objects.get(run_id="r-1")
    assert service.reject_served_run(run, "extract", "spam", owner)
    assert not service.reject_served_run(run, "extract", "spam", owner)
    run.refresh_from_db()
    assert run.status == "failed" and "spam" in run.error and kinds(run)[-2:] == ["review.decided", "run.end"]
    assert run.tier == "person"  # a person ended it


def test_it_cancels_a_queued_run(as_owner: Client, deployment: Deployment) -> None:
    send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "c-1", "input": TICKET})
    response = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs/c-1/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    again = send(as_owner, "post", f"/api/deployments/{deployment.name}/runs/c-1/cancel")
    assert again.json()["status"] == "cancelled"
    assert kinds(ServedRun.objects.get(run_id="c-1")) == ["run.end"]


def test_it_filters_the_list_of_runs(
    as_owner: Client, deployment: Deployment, django_capture_on_commit_callbacks: Any
) -> None:
    submit(as_owner, deployment.name, {"run_id": "f-1", "input": TICKET}, django_capture_on_commit_callbacks)
    send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "f-2", "input": TICKET})
    base = f"/api/deployments/{deployment.name}/runs"
    assert [r["run_id"] for r in as_owner.get(base).json()] == ["f-2", "f-1"]
    assert [r["run_id"] for r in as_owner.get(base + "?status=done").json()] == ["f-1"]
    assert [r["run_id"] for r in as_owner.get(base + "?status=queued").json()] == ["f-2"]
    assert [r["run_id"] for r in as_owner.get(base + "?node=prioritise").json()] == ["f-1"]
    assert as_owner.get(base + "?node=manual_triage").json() == []
    assert as_owner.get(base + "?tier=small").json() == []
    assert as_owner.get(base + "?since=2999-01-01T00:00:00Z").json() == []
    assert len(as_owner.get(base + "?until=2999-01-01T00:00:00Z").json()) == 2


def _frames(response: Any) -> list[dict[str, Any]]:
    text = b"".join(response.streaming_content).decode()
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "id" in fields:
            out.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
    return out


def test_it_streams_a_runs_events_and_resumes_after_last_event_id(
    as_owner: Client, deployment: Deployment, django_capture_on_commit_callbacks: Any
) -> None:
    submit(as_owner, deployment.name, {"run_id": "s-1", "input": TICKET}, django_capture_on_commit_callbacks)
    url = f"/api/deployments/{deployment.name}/runs/s-1/events"
    response = as_owner.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    frames = _frames(response)
    assert [f["id"] for f in frames] == list(range(1, 12))
    assert frames[0]["event"] == "run.start" and frames[-1]["event"] == "run.end"
    assert frames[-1]["data"]["data"]["status"] == "done"
    rest = _frames(as_owner.get(url, headers={"Last-Event-ID": "9"}))
    assert [f["id"] for f in rest] == [10, 11]
    assert as_owner.get(url, headers={"Last-Event-ID": "x"}).status_code == 400


def test_it_ends_a_stream_of_a_waiting_run_after_its_timeout(
    as_owner: Client, project: Project, owner: User, tmp_path: Any, staff: User, django_capture_on_commit_callbacks: Any
) -> None:
    weak = scripted_tier(tmp_path, staff, "weak", {"extract": "not json"})
    service.create_deployment(project, user=owner, name="weak", version=None, tiers=[weak.pk])
    submit(as_owner, "weak", {"run_id": "s-2", "input": TICKET}, django_capture_on_commit_callbacks)
    frames = _frames(as_owner.get("/api/deployments/weak/runs/s-2/events?timeout=0.3"))
    assert frames[-1]["event"] == "waiting" and frames[-1]["data"]["data"]["node"] == "extract"


class _Hook(BaseHTTPRequestHandler):
    got: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.got.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    _Hook.got = []
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()
    server.server_close()


def test_it_posts_a_signed_webhook_when_a_run_ends(
    as_owner: Client, project: Project, owner: User, good: Endpoint, hook: str, django_capture_on_commit_callbacks: Any
) -> None:
    service.create_deployment(
        project, user=owner, name="hooked", version=None, tiers=[good.pk], webhook_url=hook, webhook_secret="s3cret"
    )
    submit(as_owner, "hooked", {"run_id": "h-1", "input": TICKET}, django_capture_on_commit_callbacks)
    ((headers, body),) = _Hook.got
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Packforge-Signature"] == expected
    sent = json.loads(body)
    assert sent["run_id"] == "h-1" and sent["status"] == "done" and sent["output"]["priority"] == "p1"


class _Flaky(_Hook):
    failures = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.got.append((dict(self.headers), body))
        failing = _Flaky.failures > 0
        _Flaky.failures -= 1
        self.send_response(500 if failing else 204)
        self.end_headers()


def test_it_retries_a_failing_webhook_until_it_is_taken(
    project: Project, owner: User, good: Endpoint, django_capture_on_commit_callbacks: Any
) -> None:
    from studio.celery import app
    from studio.deployments.tasks import send_webhook

    _Hook.got, _Flaky.failures = [], 2
    server = HTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        deployment = service.create_deployment(
            project,
            user=owner,
            name="flaky",
            version=None,
            tiers=[good.pk],
            webhook_url=f"http://127.0.0.1:{server.server_port}/hook",
        )
        run = service.submit(deployment, TICKET, run_id="flaky-1", user=owner).run
        ServedRun.objects.filter(pk=run.pk).update(status="done")
        app.conf.task_eager_propagates = False  # a retry is a Retry exception; the eager fixture restores it
        send_webhook.apply(args=(run.pk,))  # eager: each retry runs at once
    finally:
        server.shutdown()
        server.server_close()
    assert len(_Hook.got) == 3
    assert len({body for _, body in _Hook.got}) == 1  # the same body each time
    assert all("X-Packforge-Signature" not in h for h, _ in _Hook.got)  # no secret: no signature
