"""Deployments: created by authors on a pack version and endpoint tiers; changing the
version, tiers or webhook is written to the deployment's history."""

from __future__ import annotations

from django.test import Client

from studio.deployments.models import Deployment, DeploymentChange
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import head_of, send, teammate_saves


def test_it_creates_a_deployment_on_the_newest_version(
    as_owner: Client, project: Project, broken: Endpoint, good: Endpoint
) -> None:
    body = {"project": "triage", "name": "triage-prod", "tiers": [broken.pk, good.pk], "webhook_secret": "s"}
    response = send(as_owner, "post", "/api/deployments", body)
    assert response.status_code == 201, response.content
    got = response.json()
    assert got["version"] == head_of(project)
    assert got["tiers"] == [{"endpoint": broken.pk, "name": "small"}, {"endpoint": good.pk, "name": "large"}]
    assert got["has_webhook_secret"] and "webhook_secret" not in got
    history = as_owner.get("/api/deployments/triage-prod/changes").json()
    assert [c["field"] for c in history] == ["created"]
    assert as_owner.get("/api/deployments").json()[0]["name"] == "triage-prod"


def test_it_creates_a_deployment_with_no_tiers_on_the_packs_own_model(as_owner: Client, project: Project) -> None:
    body = {"project": "triage", "name": "triage-own", "tiers": []}
    response = send(as_owner, "post", "/api/deployments", body)
    assert response.status_code == 201, response.content
    assert response.json()["tiers"] == []
    assert Deployment.objects.get(name="triage-own").tiers == []


def test_it_refuses_a_bad_name_a_taken_name_an_unknown_endpoint_and_version(
    as_owner: Client, deployment: Deployment, good: Endpoint
) -> None:
    def create(**fields: object) -> tuple[int, str]:
        response = send(as_owner, "post", "/api/deployments", {"project": "triage", "name": "fresh", **fields})
        return response.status_code, str(response.json().get("detail"))

    assert create(name="Bad Name")[0] == 400
    assert create(name=deployment.name)[0] == 400
    status, detail = create(tiers=[good.pk, 99999])
    assert status == 400 and "99999" in detail
    assert create(tiers=[good.pk, good.pk])[0] == 400
    assert create(version="0" * 40)[0] == 400
    assert not Deployment.objects.filter(name="fresh").exists()


def test_it_writes_each_change_of_version_and_tiers_to_the_history(
    as_owner: Client, deployment: Deployment, broken: Endpoint, good: Endpoint, project: Project
) -> None:
    first = deployment.version
    repo = PackRepo(project.repo_path)
    second = teammate_saves(repo, "README.md", "v2\n")
    url = f"/api/deployments/{deployment.name}"
    changed = send(as_owner, "patch", url, {"tiers": [broken.pk, good.pk]})
    assert changed.status_code == 200 and [t["name"] for t in changed.json()["tiers"]] == ["small", "large"]
    unchanged = send(as_owner, "patch", url, {"tiers": [broken.pk, good.pk], "version": first[:10]})
    assert unchanged.status_code == 200
    moved = send(as_owner, "patch", url, {"version": second})
    assert moved.json()["version"] == second
    send(as_owner, "patch", url, {"webhook_secret": "new"})
    history = as_owner.get(f"{url}/changes").json()
    assert [c["field"] for c in history] == ["webhook_secret", "version", "tiers", "created"]
    assert history[1]["old"] == first and history[1]["new"] == second
    assert history[2]["old"] == [good.pk] and history[2]["new"] == [broken.pk, good.pk]
    assert history[0]["old"] is False and history[0]["new"] is True  # a secret's history hides it
    assert {c["user"] for c in history} == {"olive"}
    assert DeploymentChange.objects.filter(deployment=deployment).count() == 4


def test_it_runs_new_submissions_on_the_version_the_deployment_has_then(
    as_owner: Client, deployment: Deployment, project: Project
) -> None:
    from studio.deployments.models import ServedRun
    from tests.support.serving import TICKET

    send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "old", "input": TICKET})
    second = teammate_saves(PackRepo(project.repo_path), "README.md", "v2\n")
    send(as_owner, "patch", f"/api/deployments/{deployment.name}", {"version": second})
    send(as_owner, "post", f"/api/deployments/{deployment.name}/runs", {"run_id": "new", "input": TICKET})
    versions = dict(ServedRun.objects.values_list("run_id", "version"))
    assert versions == {"old": deployment.version, "new": second}
