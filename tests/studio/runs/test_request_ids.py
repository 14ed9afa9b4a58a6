"""A try-it run's page shows each model call's request ID: the X-Request-ID
(run.node.attempt) the model server received, so an operator can find the call in
that server's log."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import execute
from tests.support.fault_server import FaultServer


def test_it_shows_the_request_id_each_model_call_sent(
    as_owner: Client, project: Project, owner: User, staff: User, fault: FaultServer
) -> None:
    endpoint = Endpoint.objects.create(name="served", spec=fault.spec(), created_by=staff)
    run = execute.new_try_run(project, user=owner, version=None, endpoint=endpoint, input={"ticket": "charged twice"})
    execute.run_try(run.pk)
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
