"""Who may use each proposals route: anonymous (401), a stranger (404: names do not leak),
a viewer (read only: 403 on any change), a reviewer (reads, reviews and comments; 403 on
what only authors do), another author, and an API token scoped to a deployment (403
everywhere here). Each case starts from one open proposal by the owner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken, Membership, Role
from studio.deployments import service as deployments
from studio.projects.models import Project
from studio.proposals.models import Proposal
from tests.support.studio import client_for, make_user, send

URL = "/api/projects/triage/proposals"
PROMPT = "prompts/classify.txt"
READ, REVIEW, AUTHOR = "read", "review", "author"


def files(text: str) -> dict[str, Any]:
    return {PROMPT: text}


# (method, url, body made from the open proposal, who may, the status a permitted call gets)
ROUTES: list[tuple[str, str, Callable[[Proposal], Any], str, int]] = [
    ("get", URL, lambda p: None, READ, 200),
    ("get", f"{URL}/1", lambda p: None, READ, 200),
    ("get", "/api/projects/triage/proposal-rules", lambda p: None, READ, 200),
    ("post", f"{URL}/1/approve", lambda p: {"head": p.head}, REVIEW, 200),
    ("post", f"{URL}/1/request-changes", lambda p: {"body": "why"}, REVIEW, 200),
    ("post", f"{URL}/1/comments", lambda p: {"body": "hm"}, REVIEW, 201),
    ("post", URL, lambda p: {"title": "another", "files": files("Other.\n")}, AUTHOR, 201),
    ("put", f"{URL}/1", lambda p: {"base": p.head, "message": "m", "files": files("New.\n")}, AUTHOR, 200),
    ("post", f"{URL}/1/sync", lambda p: {"head": p.head}, AUTHOR, 400),  # main has not moved: nothing to bring in
    ("post", f"{URL}/1/merge", lambda p: None, AUTHOR, 409),  # not approved yet
    ("post", f"{URL}/1/close", lambda p: {}, AUTHOR, 200),
    ("post", f"{URL}/1/reopen", lambda p: None, AUTHOR, 400),  # it is open
    ("patch", "/api/projects/triage/proposal-rules", lambda p: {"approvals_required": 2}, AUTHOR, 200),
]
IDS = [f"{m} {u.removeprefix('/api/projects/triage/')}" for m, u, *_ in ROUTES]


@pytest.fixture
def proposal(project: Project, as_owner: Client) -> Proposal:
    made = send(as_owner, "post", URL, {"title": "t", "files": files("Classify.\n")})
    assert made.status_code == 201, made.content
    return Proposal.objects.get()


def co_author(project: Project) -> Client:
    ann = make_user("ann")
    Membership.objects.create(user=ann, project=project, role=Role.AUTHOR)
    return client_for(ann)


def scoped_token(project: Project, owner: User) -> Client:
    deployment = deployments.create_deployment(project, user=owner, name="triage-live", version=None, tiers=[])
    _, token = ApiToken.issue(owner, "scoped", deployment=deployment)
    return Client(headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(("method", "url", "body", "who", "status"), ROUTES, ids=IDS)
def test_it_lets_each_persona_do_what_its_role_allows(
    method: str,
    url: str,
    body: Callable[[Proposal], Any],
    who: str,
    status: int,
    proposal: Proposal,
    project: Project,
    owner: User,
    as_viewer: Client,
    as_reviewer: Client,
    as_stranger: Client,
) -> None:
    payload = body(proposal)
    assert send(Client(), method, url, payload).status_code == 401
    assert send(as_stranger, method, url, payload).status_code == 404
    assert send(scoped_token(project, owner), method, url, payload).status_code == 403
    assert send(as_viewer, method, url, payload).status_code == (status if who == READ else 403)
    assert send(as_reviewer, method, url, payload).status_code == (403 if who == AUTHOR else status)
    assert send(co_author(project), method, url, payload).status_code == status
