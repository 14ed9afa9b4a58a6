"""Who may use each deployments route: anonymous (401), a stranger (404: names do not
leak), a viewer and a reviewer (read only: 403 on changes), the author, and an API token
scoped to another deployment (403 everywhere here). A token scoped to this deployment
submits and reads its runs and does nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.deployments.models import Deployment, ServedRun
from tests.support.serving import TICKET
from tests.support.studio import send

NAME = "triage-prod"
READ = "read"
WRITE = "write"

# (method, url, body, kind, the author's status)
ROUTES: list[tuple[str, str, Any, str, int]] = [
    ("get", f"/api/deployments/{NAME}", None, READ, 200),
    ("get", f"/api/deployments/{NAME}/changes", None, READ, 200),
    ("get", f"/api/deployments/{NAME}/runs", None, READ, 200),
    ("get", f"/api/deployments/{NAME}/runs/known", None, READ, 200),
    ("get", f"/api/deployments/{NAME}/runs/known/events?timeout=0.1", None, READ, 200),
    ("patch", f"/api/deployments/{NAME}", {"webhook_url": "http://127.0.0.1:9/x"}, WRITE, 200),
    ("post", f"/api/deployments/{NAME}/tokens", {"name": "ci"}, WRITE, 201),
    ("post", f"/api/deployments/{NAME}/runs", {"run_id": "new", "input": TICKET}, WRITE, 202),
    ("post", f"/api/deployments/{NAME}/runs/known/cancel", None, WRITE, 200),
    ("post", f"/api/deployments/{NAME}/promote", {}, WRITE, 400),  # it serves main's tip already
    ("post", f"/api/deployments/{NAME}/rollback", {}, WRITE, 400),  # it has served no other version
    ("delete", f"/api/deployments/{NAME}", None, WRITE, 204),
]
IDS = [f"{m} {u.removeprefix('/api/deployments/')}" for m, u, *_ in ROUTES]


@pytest.fixture
def known(deployment: Deployment, owner: User) -> ServedRun:
    return ServedRun.objects.create(
        deployment=deployment, run_id="known", input=TICKET, input_digest="x", version=deployment.version
    )


def token_client(deployment: Deployment, user: User) -> Client:
    _, token = ApiToken.issue(user, "scoped", deployment=deployment)
    return Client(headers={"Authorization": f"Bearer {token}"})


def call(client: Client, method: str, url: str, body: Any) -> int:
    if method == "get":
        response = client.get(url)
        if response.streaming:
            b"".join(response.streaming_content)
        return int(response.status_code)
    return int(send(client, method, url, body).status_code)


@pytest.mark.parametrize(("method", "url", "body", "kind", "author"), ROUTES, ids=IDS)
def test_it_lets_each_persona_do_what_its_role_allows(
    method: str,
    url: str,
    body: Any,
    kind: str,
    author: int,
    known: ServedRun,
    other: Deployment,
    owner: User,
    as_owner: Client,
    as_viewer: Client,
    as_reviewer: Client,
    as_stranger: Client,
) -> None:
    member = author if kind == READ else 403
    assert call(Client(), method, url, body) == 401
    assert call(as_stranger, method, url, body) == 404
    assert call(as_viewer, method, url, body) == member
    assert call(as_reviewer, method, url, body) == member
    assert call(token_client(other, owner), method, url, body) == 403
    assert call(as_owner, method, url, body) == author


def test_it_lets_a_deployment_token_submit_and_read_its_runs_only(
    known: ServedRun, deployment: Deployment, other: Deployment, owner: User
) -> None:
    client = token_client(deployment, owner)
    base = f"/api/deployments/{NAME}"
    assert send(client, "post", f"{base}/runs", {"run_id": "by-token", "input": TICKET}).status_code == 202
    assert client.get(f"{base}/runs").status_code == 200
    assert client.get(f"{base}/runs/by-token").json()["status"] == "queued"
    assert call(client, "get", f"{base}/runs/known/events?timeout=0.1", None) == 200
    assert send(client, "post", f"{base}/runs/by-token/cancel").status_code == 200
    refused = [
        ("get", base, None),
        ("get", f"{base}/changes", None),
        ("patch", base, {"webhook_url": ""}),
        ("post", f"{base}/tokens", {"name": "more"}),
        ("delete", base, None),
        ("get", "/api/deployments", None),
        ("post", "/api/deployments", {"project": "triage", "name": "x"}),
        ("get", f"/api/deployments/{other.name}/runs", None),
        ("post", f"/api/deployments/{other.name}/runs", {"input": TICKET}),
        ("get", "/api/projects", None),
        ("get", "/api/tokens", None),
        ("get", "/api/endpoints", None),
    ]
    for method, url, body in refused:
        assert call(client, method, url, body) == 403, (method, url)
    assert Deployment.objects.filter(name=NAME).exists()


def test_it_stops_a_deployment_token_when_its_maker_is_no_longer_an_author(
    deployment: Deployment, viewer: User
) -> None:
    client = token_client(deployment, viewer)  # made for a viewer: acts as the viewer
    assert client.get(f"/api/deployments/{NAME}/runs").status_code == 200
    response = send(client, "post", f"/api/deployments/{NAME}/runs", {"input": TICKET})
    assert response.status_code == 403


def test_it_answers_a_superuser_as_an_author(deployment: Deployment) -> None:
    boss = User.objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client()
    client.force_login(boss)
    assert client.get(f"/api/deployments/{NAME}").status_code == 200
