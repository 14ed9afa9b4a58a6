"""A served run's page: its steps from the trace (rejected text for authors only), its
deployment and review item, and the same 404 for a stranger, another project's slug or
an unknown run id."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.deployments import service
from studio.deployments.models import ServedRun
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.review.models import ReviewItem
from tests.support.serving import TICKET
from tests.support.studio import client_for


def test_members_read_a_served_runs_steps_and_strangers_do_not(
    project: Project,
    broken: Endpoint,
    good: Endpoint,
    viewer: User,
    stranger: User,
    as_owner: Client,
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    ladder = service.create_deployment(
        project, user=project.created_by, name="ladder", version=None, tiers=[broken.pk, good.pk]
    )
    with django_capture_on_commit_callbacks(execute=True):
        service.submit(ladder, TICKET, run_id="page-1", user=None)
    run = ServedRun.objects.get(run_id="page-1")
    assert run.status == ServedRun.Status.DONE
    url = "/p/triage/deployments/ladder/runs/page-1"
    as_viewer = client_for(viewer).get(url).content.decode()
    assert 'id="steps"' in as_viewer and "classify" in as_viewer and 'id="run-output"' in as_viewer
    assert "escalat" in as_viewer or "large" in as_viewer  # the step settled on the second tier
    assert "not json at all" not in as_viewer  # rejected text: authors only
    assert "not json at all" in as_owner.get(url).content.decode()
    assert 'href="/p/triage/deployments/ladder"' in as_viewer and "never waited for a person" in as_viewer
    assert client_for(stranger).get(url).status_code == 404
    assert client_for(viewer).get("/p/triage/deployments/ladder/runs/nope").status_code == 404
    assert Client().get(url).status_code == 302  # to the login page


def test_a_waiting_run_links_its_review_item_and_escapes_model_text(
    project: Project, owner: User, as_owner: Client
) -> None:
    deployment = service.create_deployment(project, user=owner, name="quiet", version=None, tiers=[])
    run = ServedRun.objects.create(
        deployment=deployment,
        run_id="w-1",
        input={"ticket": "<script>alert(1)</script>"},
        input_digest="d",
        version=deployment.version,
        status=ServedRun.Status.WAITING,
        waiting_at="approve",
        waiting_reason="human",
    )
    item = ReviewItem.objects.create(
        run=run, deployment=deployment, project=project, node="approve", step=1, reason="human"
    )
    page = as_owner.get("/p/triage/deployments/quiet/runs/w-1").content.decode()
    assert f'href="/review/{item.pk}"' in page and 'id="run-waiting"' in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "hx-get" not in page.split('id="served-trace"')[1].split(">")[0]  # a waiting run does not poll
