"""A deployment as an MCP server (/mcp/deployments/NAME, studio/deployments/mcp.py),
driven by the SDK's own streamable-HTTP client against the real studio on loopback
(pytest-django's live server) with a real `celery worker` subprocess running the runs:

- with the deployment's token, the client lists the pack's tool and calls it: an
  ordinary ServedRun (trace, checkpoint) whose output, tier and run id come back;
- a run that waits for a person answers `waiting` with its review item;
- without a token, with a bad one, or with another deployment's token: 401; a user
  who is no member: 404; a member who may not submit: 403."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.celery_workers import ROOT, CeleryWorker, serving_worker_pool
from tests.support.mcp import run_async

CASE = json.loads((ROOT / "packs" / "support_triage" / "evalset.jsonl").read_text().splitlines()[0])
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def workers(transactional_db: None, tmp_path: Path, settings: Any) -> Iterator[Callable[[str], CeleryWorker]]:
    with serving_worker_pool("mcp", tmp_path, settings) as start:
        yield start


@pytest.fixture
def studio(live_server: Any, workers: Callable[[str], CeleryWorker], tmp_path: Path) -> dict[str, Any]:
    """Project `triage` (support_triage) with two deployments: `triage` on the pack's own
    model, and `triage-unsure` whose one tier answers `extract` with text that is not
    JSON (so its runs wait for a person); tokens; one worker started."""
    from django.contrib.auth.models import User

    from studio.accounts.models import ApiToken, Membership, Role
    from studio.deployments import service
    from studio.endpoints.models import Endpoint
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    owner = User.objects.create_user("olive", "olive@example.com", "pw")
    viewer = User.objects.create_user("vic", "vic@example.com", "pw")
    stranger = User.objects.create_user("sid", "sid@example.com", "pw")
    staff = User.objects.create_user("stella", "stella@example.com", "pw", is_staff=True)
    project = create_project(
        slug="triage", name="triage", owner=owner, pack_files=example_files("support_triage"), message="Create"
    )
    Membership.objects.create(user=viewer, project=project, role=Role.VIEWER)
    script = json.loads((ROOT / "packs" / "support_triage" / "fakes" / "scripted.json").read_text())
    answers = {**script["inputs"][0]["answers"], "extract": "no JSON here"}
    (tmp_path / "small.json").write_text(json.dumps({"inputs": [{"match": CASE["input"], "answers": answers}]}))
    small = Endpoint.objects.create(name="small", spec=f"fake:{tmp_path / 'small.json'}", created_by=staff)
    triage = service.create_deployment(project, user=owner, name="triage", version=None, tiers=[])
    unsure = service.create_deployment(project, user=owner, name="triage-unsure", version=None, tiers=[small.pk])
    workers("w1")
    return {
        "url": str(live_server.url),
        "triage": ApiToken.issue(owner, "mcp", deployment=triage)[1],
        "unsure": ApiToken.issue(owner, "mcp", deployment=unsure)[1],
        "owner": ApiToken.issue(owner, "cli")[1],
        "viewer": ApiToken.issue(viewer, "cli")[1],
        "stranger": ApiToken.issue(stranger, "cli")[1],
    }


def _mcp(url: str, token: str, body: Callable[[ClientSession], Any]) -> Any:
    """`body(session)` over the SDK's streamable-HTTP client, the token as its bearer."""

    async def main() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await body(session)

    return run_async(main)


def test_it_lists_and_calls_a_deployment_with_its_token(studio: dict[str, Any]) -> None:
    from studio.deployments.models import ServedRun

    async def body(s: ClientSession) -> Any:
        return await s.list_tools(), await s.call_tool("support_triage", CASE["input"])

    listed, called = _mcp(f"{studio['url']}/mcp/deployments/triage", studio["triage"], body)
    (tool,) = listed.tools
    assert tool.name == "support_triage" and tool.input_schema["required"] == ["ticket"]
    assert called.is_error is False, called.content
    result = called.structured_content
    assert result["status"] == "done" and result["tier"] == "pack"
    assert result["output"]["category"] == "billing" and result["output"]["order_id"] == "ORD-48213"
    run = ServedRun.objects.get(run_id=result["run_id"])  # an ordinary served run
    assert run.deployment.name == "triage" and run.status == "done" and run.output == result["output"]
    assert [s["node"] for s in run.trace["steps"]][:2] == ["classify", "extract"]
    assert json.loads(called.content[0].text) == result


def test_it_answers_waiting_with_the_review_item(studio: dict[str, Any]) -> None:
    """Through the SDK's high-level `Client`, which negotiates the newer per-request
    protocol era (2026-07-28) where the server offers it: the studio's endpoint does."""
    from studio.review.models import ReviewItem

    async def main() -> tuple[str, Any]:
        url = f"{studio['url']}/mcp/deployments/triage-unsure"
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {studio['owner']}"}, timeout=120)  # a user's token
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return client.protocol_version, await client.call_tool("support_triage", CASE["input"])

    protocol, called = run_async(main)
    assert protocol == "2026-07-28"
    result = called.structured_content
    assert called.is_error is False
    assert (result["status"], result["waiting_at"], result["output"]) == ("waiting", "extract", None)
    item = ReviewItem.objects.get(pk=result["review_item"])
    assert item.run.run_id == result["run_id"] and item.node == "extract"


def test_it_refuses_a_caller_without_the_right_token(studio: dict[str, Any]) -> None:
    from studio.deployments.models import ServedRun

    def post(token: str | None) -> httpx.Response:
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        url = f"{studio['url']}/mcp/deployments/triage"
        return httpx.post(url, json=INITIALIZE, headers=HEADERS | auth, timeout=60)

    refused = {
        "no token": post(None),
        "a bad token": post("pf_" + "x" * 43),
        "another deployment's token": post(studio["unsure"]),
        "a stranger's token": post(studio["stranger"]),
        "a viewer's token": post(studio["viewer"]),
    }
    assert {why: r.status_code for why, r in refused.items()} == {
        "no token": 401,
        "a bad token": 401,
        "another deployment's token": 401,
        "a stranger's token": 404,  # names do not leak
        "a viewer's token": 403,
    }
    assert all("detail" in r.json() for r in refused.values())
    assert all(r.headers["WWW-Authenticate"].startswith("Bearer") for r in refused.values() if r.status_code == 401)
    assert post(studio["triage"]).status_code == 200  # the same request with the right token
    assert not ServedRun.objects.exists()
