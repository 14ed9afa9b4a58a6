"""How the API authenticates: a bearer token, or the session with CSRF on writes."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.projects.models import Project
from tests.support.studio import bearer, head_of, send


def test_it_accepts_a_bearer_token(owner_token: Client, project: Project) -> None:
    assert owner_token.get("/api/projects/triage").json()["role"] == "author"
    answer = send(
        owner_token,
        "put",
        "/api/projects/triage/files",
        {"base": head_of(project), "message": "from CI", "files": {"ci.txt": "x"}},
    )
    assert answer.status_code == 200  # no CSRF token needed with a bearer token


def test_it_records_when_a_token_was_used(owner: User, project: Project) -> None:
    row, token = ApiToken.issue(owner, "ci")
    Client(headers={"Authorization": f"Bearer {token}"}).get("/api/projects")
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_it_applies_roles_to_token_users(viewer: User, stranger: User, project: Project) -> None:
    body = {"base": head_of(project), "message": "m", "files": {"a.txt": "x"}}
    assert send(bearer(viewer), "put", "/api/projects/triage/files", body).status_code == 403
    assert send(bearer(stranger), "put", "/api/projects/triage/files", body).status_code == 404


def test_it_refuses_an_unknown_or_malformed_token(project: Project) -> None:
    for header in ("Bearer pf_nope", "Bearer ", "Token abc", "Basic dXNlcjpwYXNz"):
        answer = Client(headers={"Authorization": header}).get("/api/projects/triage")
        assert answer.status_code == 401, header
        assert answer.json()["detail"] in (
            "invalid or revoked token",
            "the Authorization header must be 'Bearer <token>'",
        )


def test_it_refuses_a_bad_token_even_with_a_session(owner: User, project: Project) -> None:
    client = Client(headers={"Authorization": "Bearer pf_revoked"})
    client.force_login(owner)
    assert client.get("/api/projects/triage").status_code == 401


def test_it_refuses_a_token_of_an_inactive_user(owner: User, project: Project) -> None:
    client = bearer(owner)
    User.objects.filter(pk=owner.pk).update(is_active=False)
    assert client.get("/api/projects").status_code == 401


def test_it_requires_csrf_for_session_writes(owner: User, project: Project) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    body = {"base": head_of(project), "message": "m", "files": {"a.txt": "x"}}
    assert client.get("/api/projects/triage").status_code == 200  # reads need no CSRF token
    refused = send(client, "put", "/api/projects/triage/files", body)
    assert refused.status_code == 403 and refused.json() == {"detail": "CSRF check Failed"}
    client.get("/")  # the page sets the CSRF cookie, as a browser would see it
    token = client.cookies["csrftoken"].value
    answer = client.put(
        "/api/projects/triage/files", body, content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert answer.status_code == 200


def test_it_answers_401_not_csrf_to_a_write_without_a_session(project: Project) -> None:
    answer = send(Client(enforce_csrf_checks=True), "post", "/api/projects", {"slug": "x"})
    assert answer.status_code == 401 and answer.json() == {"detail": "Unauthorized"}
