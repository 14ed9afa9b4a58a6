"""The deployment pages: authors create and change deployments there (each change in the
history shown on the page) and make deployment tokens; members read; strangers get 404."""

from __future__ import annotations

from typing import Any

from django.test import Client

from studio.accounts.models import ApiToken
from studio.deployments.models import Deployment, DeploymentChange
from studio.deployments.views import escalation_counts
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import teammate_saves


def test_it_creates_and_changes_a_deployment_from_its_pages(
    as_owner: Client, project: Project, broken: Endpoint, good: Endpoint
) -> None:
    response = as_owner.post("/p/triage/deployments/", {"name": "web-made", "tiers": "small, large"})
    assert response.status_code == 302 and response["Location"] == "/p/triage/deployments/web-made"
    made = Deployment.objects.get(name="web-made")
    assert made.tiers == [broken.pk, good.pk]
    second = teammate_saves(PackRepo(project.repo_path), "README.md", "v2\n")
    changed = as_owner.post("/p/triage/deployments/web-made", {"action": "change", "version": second, "tiers": "large"})
    assert changed.status_code == 302
    assert [c.field for c in DeploymentChange.objects.filter(deployment=made)] == ["tiers", "version", "created"]
    page = as_owner.get("/p/triage/deployments/web-made").content.decode()
    assert second in page and 'id="deployment-history"' in page and "large → a person" in page
    token_page = as_owner.post("/p/triage/deployments/web-made", {"action": "token", "token_name": "ci"})
    assert 'id="new-token"' in token_page.content.decode()
    assert ApiToken.objects.get(name="ci").deployment == made
    listing = as_owner.get("/p/triage/deployments/").content.decode()
    assert "web-made" in listing


def test_it_refuses_an_unknown_endpoint_in_the_form(as_owner: Client, project: Project) -> None:
    response = as_owner.post("/p/triage/deployments/", {"name": "web-made", "tiers": "nowhere"})
    assert response.status_code == 200 and "no endpoint named" in response.content.decode()
    assert not Deployment.objects.exists()


def test_it_shows_members_the_pages_and_lets_only_authors_change(
    as_viewer: Client, as_reviewer: Client, as_stranger: Client, deployment: Deployment
) -> None:
    url = f"/p/triage/deployments/{deployment.name}"
    for member in (as_viewer, as_reviewer):
        page = member.get(url)
        assert page.status_code == 200 and 'id="change-deployment"' not in page.content.decode()
        assert member.post(url, {"action": "delete"}).status_code == 403
        assert member.post("/p/triage/deployments/", {"name": "x"}).status_code == 403
    assert as_stranger.get(url).status_code == 404
    assert as_stranger.get("/p/triage/deployments/").status_code == 404
    assert Deployment.objects.filter(pk=deployment.pk).exists()


def test_it_counts_escalations_per_node_and_tier_on_the_deployment_page(
    as_owner: Client,
    project: Project,
    broken: Endpoint,
    good: Endpoint,
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from studio.deployments import service
    from tests.support.serving import TICKET

    made = service.create_deployment(
        project, user=project.created_by, name="ladder", version=None, tiers=[broken.pk, good.pk]
    )
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(2):
            service.submit(made, TICKET, run_id=f"e-{n}", user=None)
    rows = escalation_counts(made)
    assert {(r["node"], r["from"], r["to"], r["count"]) for r in rows} == {
        ("classify", "small", "large", 2),
        ("extract", "small", "large", 2),
    }
    page = as_owner.get("/p/triage/deployments/ladder").content.decode()
    assert 'id="escalations"' in page and "classify" in page
