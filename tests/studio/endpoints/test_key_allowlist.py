"""An endpoint's key variable must be on the operator's allowlist (ENDPOINT_KEY_VARS,
default PACKFORGE_KEY_*), checked on create, on edit and when the endpoint is opened; a
check shows no more of the server's answer than a status line (issue 22)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runtime import BadSpec
from studio.endpoints import backends
from studio.endpoints.models import Endpoint
from tests.support.fault_server import FaultServer

BODY = {"name": "hosted", "spec": "openai:http://127.0.0.1:9/v1#m", "key_env": "PACKFORGE_KEY_OPENAI"}
FORM = {**BODY, "price_in": "0", "price_out": "0", "concurrency": "2"}


def test_it_accepts_a_key_variable_on_the_default_allowlist(as_staff: Client) -> None:
    answer = as_staff.post("/api/endpoints", BODY, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["key_env"] == "PACKFORGE_KEY_OPENAI"


@pytest.mark.parametrize("name", ["PWD", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY"])
def test_the_api_refuses_a_key_variable_off_the_allowlist(as_staff: Client, name: str) -> None:
    answer = as_staff.post("/api/endpoints", {**BODY, "key_env": name}, content_type="application/json")
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert detail.startswith(f"key_env: key variable {name} is not on the studio's allowlist (PACKFORGE_KEY_*;")
    assert "PACKFORGE_ENDPOINT_KEY_VARS" in detail
    assert not Endpoint.objects.exists()


def test_the_page_refuses_it_on_create_and_on_edit(as_staff: Client, staff: User) -> None:
    page = as_staff.post("/endpoints/new", {**FORM, "key_env": "PWD"})
    assert page.status_code == 400 and b"is not on the studio&#x27;s allowlist" in page.content
    endpoint = Endpoint.objects.create(name="e", spec=BODY["spec"], key_env="PACKFORGE_KEY_A", created_by=staff)
    page = as_staff.post(f"/endpoints/{endpoint.pk}/edit", {**FORM, "name": "e", "key_env": "HOME"})
    assert page.status_code == 400 and b"belongs to the studio itself" in page.content
    endpoint.refresh_from_db()
    assert endpoint.key_env == "PACKFORGE_KEY_A"


def test_the_operator_sets_the_allowlist(as_staff: Client, settings: Any) -> None:
    settings.ENDPOINT_KEY_VARS = ["OPENAI_API_KEY", "ACME_*"]
    for name in ("OPENAI_API_KEY", "ACME_PROD"):
        answer = as_staff.post(
            "/api/endpoints", {**BODY, "name": name, "key_env": name}, content_type="application/json"
        )
        assert answer.status_code == 201, answer.json()
    refused = as_staff.post(
        "/api/endpoints", {**BODY, "key_env": "PACKFORGE_KEY_OPENAI"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "(OPENAI_API_KEY, ACME_*;" in refused.json()["detail"]


def test_no_allowlist_lets_in_the_studios_own_settings(as_staff: Client, settings: Any) -> None:
    settings.ENDPOINT_KEY_VARS = ["*"]
    for name in ("SECRET_KEY", "DATABASE_URL", "PACKFORGE_GIT_ROOT"):
        answer = as_staff.post("/api/endpoints", {**BODY, "key_env": name}, content_type="application/json")
        assert answer.status_code == 400 and "belongs to the studio itself" in answer.json()["detail"], name


def test_an_endpoint_saved_before_the_rule_is_refused_when_opened(
    staff: User, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PWD", "/srv/secret-place")
    endpoint = Endpoint.objects.create(name="old", spec=fault.spec(), key_env="PWD", created_by=staff)
    with pytest.raises(BadSpec, match="endpoint 'old': key variable PWD is not on the studio's allowlist"):
        backends.open_endpoint(endpoint)
    result = backends.check(endpoint.pk)
    assert result is not None and result["ok"] is False and "allowlist" in result["error"]
    assert fault.completions() == []  # nothing was sent


def test_a_check_shows_a_status_line_not_the_servers_answer(
    staff: User, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKFORGE_KEY_TEST", "sk-test-0123456789")
    fault.configure(script=[{"status": 403, "message": "<html>internal admin page: db=10.0.0.5</html>"}] * 4)
    endpoint = Endpoint.objects.create(name="e", spec=fault.spec(), key_env="PACKFORGE_KEY_TEST", created_by=staff)
    result = backends.check(endpoint.pk)
    assert result is not None and result["answered"] is False
    assert result["error"].endswith("HTTP 403 Forbidden (the server's answer is not shown)")
    assert "admin page" not in str(result) and "10.0.0.5" not in str(result)


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (
            "http://h/v1 (request r): HTTP 500: boom <pre>trace</pre>",
            "http://h/v1 (request r): HTTP 500 Internal Server Error",
        ),
        (
            "http://h/v1: gave up after 2 tries; last: server: HTTP 599: x",
            "http://h/v1: gave up after 2 tries; last: server: HTTP 599",
        ),
        ("http://h/v1: in-band error: the secret text", "http://h/v1: in-band error (the server's text is not shown)"),
        ("ConnectError: [Errno 111] Connection refused", "ConnectError: [Errno 111] Connection refused"),
    ],
)
def test_it_cuts_an_error_to_its_status_line(error: str, shown: str) -> None:
    assert backends.status_line(error).startswith(shown)
    assert "boom" not in backends.status_line(error) and "secret" not in backends.status_line(error)


def test_it_keeps_the_answer_only_when_it_is_one_of_the_checks_own_words() -> None:
    kept = backends.without_server_text({"answer": '{"word": "zqx-amber"}', "honoured": True, "server": "llamacpp"})
    assert kept["answer"] == '{"word": "zqx-amber"}' and kept["server"] == "llamacpp"
    cut = backends.without_server_text({"answer": "<html>page</html>", "honoured": False, "server": "<b>x</b> y"})
    assert cut["answer"] == "" and cut["answer_chars"] == 17 and cut["server"] is None


def test_no_studio_setting_is_named_like_a_key() -> None:
    """The default allowlist may never cover one of the studio's own settings."""
    root = Path(__file__).resolve().parents[3]
    for source in [*(root / "studio").rglob("*.py"), root / "scripts" / "start"]:
        text = source.read_text()
        assert not re.search(r"""(env_\w+\(|environ\.get\(|environ\[|getenv\()\s*["']PACKFORGE_KEY_""", text), source
