from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from tests.support.studio import send


def test_it_makes_a_token_and_shows_it_once(as_owner: Client, owner: User) -> None:
    answer = send(as_owner, "post", "/api/tokens", {"name": "ci"})
    assert answer.status_code == 201
    made = answer.json()
    assert made["token"].startswith("pf_") and made["prefix"] == made["token"][:10] and made["revoked"] is False
    row = ApiToken.objects.get(pk=made["id"])
    assert row.user == owner and made["token"] not in row.digest
    [listed] = as_owner.get("/api/tokens").json()
    assert listed["id"] == made["id"] and listed["name"] == "ci" and "token" not in listed


def test_it_lists_only_your_own_tokens(as_owner: Client, viewer: User) -> None:
    ApiToken.issue(viewer, "theirs")
    assert as_owner.get("/api/tokens").json() == []


def test_it_revokes_a_token(as_owner: Client, owner: User) -> None:
    row, token = ApiToken.issue(owner, "laptop")
    answer = as_owner.delete(f"/api/tokens/{row.pk}")
    assert answer.status_code == 204
    row.refresh_from_db()
    assert row.revoked
    refused = Client(headers={"Authorization": f"Bearer {token}"}).get("/api/projects")
    assert refused.status_code == 401 and refused.json() == {"detail": "invalid or revoked token"}


def test_it_answers_404_for_someone_elses_token(as_owner: Client, viewer: User) -> None:
    row, _ = ApiToken.issue(viewer, "theirs")
    answer = as_owner.delete(f"/api/tokens/{row.pk}")
    assert answer.status_code == 404 and answer.json() == {"detail": f"you have no token {row.pk}"}
    row.refresh_from_db()
    assert not row.revoked


def test_it_refuses_a_bad_token_name(as_owner: Client) -> None:
    answer = send(as_owner, "post", "/api/tokens", {"name": "  "})
    assert answer.status_code == 400 and "name" in answer.json()["detail"]
    assert send(as_owner, "post", "/api/tokens", {}).status_code == 422
    assert as_owner.delete("/api/tokens/abc").status_code == 422


def test_it_requires_authentication_for_tokens(anonymous: Client, owner: User) -> None:
    row, _ = ApiToken.issue(owner, "x")
    assert anonymous.get("/api/tokens").status_code == 401
    assert send(anonymous, "post", "/api/tokens", {"name": "x"}).status_code == 401
    assert anonymous.delete(f"/api/tokens/{row.pk}").status_code == 401
    row.refresh_from_db()
    assert not row.revoked
