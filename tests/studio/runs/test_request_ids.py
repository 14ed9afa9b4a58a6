"""A try-it run's page shows each model call's request ID: the X-Request-ID
(run.node.attempt) the model server received, so an operator can find the call in
that server's log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.deployments import service
from studio.deployments.models import RunEvent, ServedRun
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import start, worker
from tests.support.fault_server import FaultServer
from tests.support.serving import TICKET, scripted_tier
from tests.support.studio import send


def test_it_shows_the_request_id_each_model_call_sent(
    as_owner: Client, project: Project, owner: User, staff: User, fault: FaultServer
) -> None:
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)
    run = start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input={"ticket": "charged twice"})
    worker.run_try(run.pk)
    run.refresh_from_db()

    sent = [r.request_id for r in fault.completions()]
    recorded = [a["request_id"] for a in run.trace["attempts"]]
    assert sent and set(sent) == set(recorded)
    assert all(rid.startswith(f"{run.trace['run_id']}.") and rid.count(".") >= 2 for rid in recorded)

    page = as_owner.get(f"/p/{project.slug}/runs/{run.pk}").content.decode()
    for rid in recorded:
        assert (
            f'<code class="request-id" title="the X-Request-ID sent to the model server: grep its log for it">{rid}</code>'
            in page
        )


def test_it_answers_a_served_runs_request_ids_as_its_events_name_them(
    eager: None,
    as_owner: Client,
    project: Project,
    owner: User,
    staff: User,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    tier = scripted_tier(tmp_path, staff, "small", {"classify": "not json at all"})
    service.create_deployment(project, user=owner, name="ladder", version=None, tiers=[tier.pk])
    with django_capture_on_commit_callbacks(execute=True):
        send(as_owner, "post", "/api/deployments/ladder/runs", {"run_id": "q-1", "input": TICKET})
    run = ServedRun.objects.get(run_id="q-1")
    sent = [e.data["request_id"] for e in RunEvent.objects.filter(run=run, kind="model.call").order_by("seq")]
    steps = as_owner.get("/api/deployments/ladder/runs/q-1").json()["steps"]
    shown = [a["request_id"] for s in steps for a in s["attempts"]]
    assert sent and shown == sent
    assert f"served{run.pk}.classify.2" in shown  # run.node.attempt: the retry after the unparsable answer


def test_it_shows_the_settled_values_a_later_draw_was_completed_with(
    as_owner: Client, as_viewer: Client, project: Project, owner: User, staff: User, fault: FaultServer
) -> None:
    """A quorum's later draw (`sure_fields`) asked for the unsettled fields only; the run
    page shows the first draw's values it was completed with, escaped, and withholds them
    from a viewer with a rejected draw's text."""
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)
    run = start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input={"ticket": "charged twice"})
    worker.run_try(run.pk)
    run.refresh_from_db()
    trace = run.trace
    first = trace["attempts"][0]
    trace["attempts"] = [
        {**first, "attempt": 2, "ok": True, "text": '{"priority": "high"}', "given": {"category": "<billing>"}},
        {**first, "attempt": 3, "ok": False, "text": "nope", "category": "schema", "given": {"category": "WITHHELD"}},
    ]
    run.trace = trace
    run.save(update_fields=["trace"])

    page = as_owner.get(f"/p/{project.slug}/runs/{run.pk}").content.decode()
    assert (
        "with the first draw's settled values: "
        '<span class="mono">{&quot;category&quot;: &quot;&lt;billing&gt;&quot;}</span>' in page
    )
    assert "WITHHELD" in page  # an author reads a rejected draw whole
    seen = as_viewer.get(f"/p/{project.slug}/runs/{run.pk}").content.decode()
    assert "&lt;billing&gt;" in seen and "WITHHELD" not in seen
