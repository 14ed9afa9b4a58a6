"""A deployment with `tiers: []` is accepted everywhere a deployment is made or changed
(API, page) and serves on the pack's own model (its manifest's `model`), as
docs/serving.md says."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from studio.deployments.models import Deployment, DeploymentChange, ServedRun
from studio.projects.models import Project
from tests.support.serving import TICKET
from tests.support.studio import send


def test_it_creates_one_from_the_page_with_the_tiers_left_empty(as_owner: Client, project: Project) -> None:
    made = as_owner.post("/p/triage/deployments/", {"name": "own-model", "tiers": ""})
    assert made.status_code == 302 and made["Location"] == "/p/triage/deployments/own-model"
    assert Deployment.objects.get(name="own-model").tiers == []
    assert "the pack&#x27;s own model" in as_owner.get("/p/triage/deployments/").content.decode()
    assert "the pack&#x27;s own model → a person" in as_owner.get("/p/triage/deployments/own-model").content.decode()


def test_it_changes_a_deployments_tiers_to_none(as_owner: Client, deployment: Deployment) -> None:
    changed = send(as_owner, "patch", f"/api/deployments/{deployment.name}", {"tiers": []})
    assert changed.status_code == 200, changed.content
    assert changed.json()["tiers"] == []
    deployment.refresh_from_db()
    assert deployment.tiers == []
    assert DeploymentChange.objects.filter(deployment=deployment, field="tiers").exists()


@pytest.mark.usefixtures("eager")
def test_it_serves_a_run_on_the_packs_own_model(
    as_owner: Client, project: Project, django_capture_on_commit_callbacks: Any
) -> None:
    made = send(as_owner, "post", "/api/deployments", {"project": "triage", "name": "own-model", "tiers": []})
    assert made.status_code == 201, made.content
    with django_capture_on_commit_callbacks(execute=True):
        submitted = send(as_owner, "post", "/api/deployments/own-model/runs", {"run_id": "own-1", "input": TICKET})
    assert submitted.status_code == 202, submitted.content
    got = as_owner.get("/api/deployments/own-model/runs/own-1").json()
    assert got["status"] == "done" and got["final"], got
    assert got["output"]["priority"] == "p1"
    assert ServedRun.objects.get(run_id="own-1").status == "done"
