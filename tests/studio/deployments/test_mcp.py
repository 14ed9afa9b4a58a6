"""/mcp/deployments/NAME (studio/deployments/mcp.py) through Django's test client: who
may use it, and what the SDK's stateless transport answers behind the view. Calls that
run a pack are in tests/integration/test_mcp_http.py (the SDK's client, a live server, a
real worker)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.deployments.models import Deployment, ServedRun

URL = "/mcp/deployments/triage-prod"
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
LIST = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}


def _client(user: User, deployment: Deployment | None = None) -> Client:
    _, token = ApiToken.issue(user, "mcp", deployment=deployment)
    return Client(headers={**HEADERS, "Authorization": f"Bearer {token}"})


def _post(client: Client, body: Any = LIST) -> Any:
    return client.post(URL, data=json.dumps(body), content_type="application/json")


def test_it_lists_the_deployments_pack_as_one_tool(deployment: Deployment) -> None:
    answer = _post(_client(deployment.created_by, deployment))
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("application/json")
    message = answer.json()
    assert message["id"] == 7
    (tool,) = message["result"]["tools"]
    assert tool["name"] == "support_triage"
    assert tool["inputSchema"]["required"] == ["ticket"]
    assert tool["outputSchema"]["required"] == ["run_id", "status", "output", "tier"]


def test_it_answers_a_user_token_of_an_author(deployment: Deployment, owner: User) -> None:
    assert _post(_client(owner)).status_code == 200


def test_it_has_no_server_sent_stream(deployment: Deployment, owner: User) -> None:
    client = _client(owner)
    assert client.get(URL).status_code == 405  # stateless: the SDK's client expects it
    assert client.delete(URL).status_code == 405  # no session to end


def test_it_answers_a_bad_message_with_a_json_rpc_error(deployment: Deployment, owner: User) -> None:
    answer = _post(_client(owner), {"jsonrpc": "2.0", "id": 1, "method": "no/such/method"})
    assert answer.json()["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("who", "status"),
    [("anonymous", 401), ("bad token", 401), ("other deployment", 401), ("stranger", 404), ("viewer", 403)],
)
def test_it_refuses_a_caller_without_the_right_token(
    deployment: Deployment, other: Deployment, stranger: User, viewer: User, who: str, status: int
) -> None:
    client = {
        "anonymous": Client(headers=HEADERS),
        "bad token": Client(headers={**HEADERS, "Authorization": "Bearer pf_" + "x" * 43}),
        "other deployment": _client(other.created_by, other),
        "stranger": _client(stranger),
        "viewer": _client(viewer),
    }[who]
    answer = _post(client, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "support_triage"}})
    assert answer.status_code == status
    assert "detail" in answer.json()
    if status == 401:
        assert answer["WWW-Authenticate"].startswith("Bearer")
    assert not ServedRun.objects.exists()


def test_it_shows_the_mcp_endpoint_on_the_deployment_page(deployment: Deployment, as_owner: Client) -> None:
    page = as_owner.get("/p/triage/deployments/triage-prod").content.decode()
    assert f'<dd class="mono" id="deployment-mcp">{URL}</dd>' in page
