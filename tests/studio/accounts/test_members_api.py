"""The users and members API: /api/users (staff) and /api/projects/{slug}/members."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken, Membership, Role
from studio.projects.models import Project
from tests.support.studio import bearer, client_for, make_colleague, make_user, send

MEMBERS = "/api/projects/triage/members"


@pytest.fixture
def newcomer(owner: User) -> User:
    """Nora, no member of triage, but the owner's colleague on another project."""
    return make_colleague("nora", of=owner)


def roles(project: Project) -> dict[str, str]:
    return {m.user.username: m.role for m in Membership.objects.filter(project=project).select_related("user")}


# -- /api/users --


def test_it_invites_a_user_with_a_one_time_link(staff: User) -> None:
    answer = send(bearer(staff), "post", "/api/users", {"username": "ivy", "email": "ivy@example.com"})
    assert answer.status_code == 201
    made = answer.json()
    assert made["username"] == "ivy" and made["has_password"] is False and made["staff"] is False
    assert made["set_password_url"].startswith("http://testserver/invite/")
    ivy = User.objects.get(username="ivy")
    assert not ivy.has_usable_password()

    link = made["set_password_url"].removeprefix("http://testserver")
    browser = Client()
    form = browser.get(link, follow=True)
    assert form.status_code == 200 and b'id="set-password"' in form.content
    set_url = form.redirect_chain[-1][0]
    done = browser.post(
        set_url, {"new_password1": "a long new passphrase 42", "new_password2": "a long new passphrase 42"}
    )
    assert done.status_code == 302 and done["Location"] == "/login/"
    assert Client().login(username="ivy", password="a long new passphrase 42")

    spent = Client().get(link, follow=True)
    assert b'id="link-spent"' in spent.content


def test_it_lists_users_for_staff(staff: User, owner: User) -> None:
    listed = bearer(staff).get("/api/users").json()
    assert {u["username"] for u in listed} == {"stella", "olive"}


def test_it_makes_a_new_link_for_a_user(staff: User, owner: User) -> None:
    answer = send(bearer(staff), "post", "/api/users/olive/set-password-link")
    assert answer.status_code == 200 and "/invite/" in answer.json()["set_password_url"]
    assert send(bearer(staff), "post", "/api/users/nobody/set-password-link").status_code == 404


def test_it_refuses_a_taken_or_bad_username(staff: User, owner: User) -> None:
    taken = send(bearer(staff), "post", "/api/users", {"username": "olive"})
    assert taken.status_code == 409 and "exists" in taken.json()["detail"]
    bad = send(bearer(staff), "post", "/api/users", {"username": "no spaces!"})
    assert bad.status_code == 400
    assert send(bearer(staff), "post", "/api/users", {"username": "x", "email": "not-an-email"}).status_code == 400
    assert send(bearer(staff), "post", "/api/users", {}).status_code == 422


@pytest.mark.parametrize("persona", ["owner", "reviewer", "viewer", "stranger"])
def test_it_lets_only_staff_manage_users(request: pytest.FixtureRequest, project: Project, persona: str) -> None:
    client = bearer(request.getfixturevalue(persona))
    assert client.get("/api/users").status_code == 403
    assert send(client, "post", "/api/users", {"username": "ivy"}).status_code == 403
    assert send(client, "post", "/api/users/olive/set-password-link").status_code == 403
    assert not User.objects.filter(username="ivy").exists()


def test_it_requires_authentication_for_users(db: None) -> None:
    assert Client().get("/api/users").status_code == 401
    assert send(Client(), "post", "/api/users", {"username": "ivy"}).status_code == 401


# -- /api/projects/{slug}/members --


@pytest.mark.parametrize("persona", ["owner", "reviewer", "viewer", "staff"])
def test_it_lists_members_to_members_and_staff(request: pytest.FixtureRequest, project: Project, persona: str) -> None:
    answer = bearer(request.getfixturevalue(persona)).get(MEMBERS)
    assert answer.status_code == 200
    assert {m["username"]: m["role"] for m in answer.json()} == {
        "olive": "author",
        "rita": "reviewer",
        "victor": "viewer",
    }


def test_it_hides_members_from_a_stranger(project: Project, stranger: User) -> None:
    assert bearer(stranger).get(MEMBERS).status_code == 404
    assert send(bearer(stranger), "put", f"{MEMBERS}/sam", {"role": "author"}).status_code == 404
    assert roles(project).get("sam") is None


@pytest.mark.parametrize("persona", ["owner", "staff"])
def test_it_gives_changes_and_takes_a_role(
    request: pytest.FixtureRequest, project: Project, newcomer: User, persona: str
) -> None:
    client = bearer(request.getfixturevalue(persona))
    added = send(client, "put", f"{MEMBERS}/nora", {"role": "reviewer"})
    assert added.status_code == 201 and added.json() == {"username": "nora", "role": "reviewer"}
    changed = send(client, "put", f"{MEMBERS}/nora", {"role": "author"})
    assert changed.status_code == 200 and roles(project)["nora"] == "author"
    assert client.delete(f"{MEMBERS}/nora").status_code == 204
    assert "nora" not in roles(project)
    assert client.delete(f"{MEMBERS}/nora").status_code == 404


def test_it_lets_a_newly_given_role_open_the_project(project: Project, owner: User, newcomer: User) -> None:
    assert client_for(newcomer).get("/p/triage/").status_code == 404
    send(bearer(owner), "put", f"{MEMBERS}/nora", {"role": "viewer"})
    assert client_for(newcomer).get("/p/triage/").status_code == 200


@pytest.mark.parametrize("persona", ["reviewer", "viewer"])
def test_it_refuses_role_changes_by_a_non_author(
    request: pytest.FixtureRequest, project: Project, newcomer: User, persona: str
) -> None:
    client = bearer(request.getfixturevalue(persona))
    assert send(client, "put", f"{MEMBERS}/nora", {"role": "viewer"}).status_code == 403
    assert (
        send(client, "put", f"{MEMBERS}/{request.getfixturevalue(persona).username}", {"role": "author"}).status_code
        == 403
    )
    assert client.delete(f"{MEMBERS}/olive").status_code == 403
    assert roles(project) == {"olive": "author", "rita": "reviewer", "victor": "viewer"}


def test_it_keeps_the_last_author(project: Project, owner: User, staff: User, newcomer: User) -> None:
    for client in (bearer(owner), bearer(staff)):
        demoted = send(client, "put", f"{MEMBERS}/olive", {"role": "viewer"})
        assert demoted.status_code == 409 and "last author" in demoted.json()["detail"]
        assert client.delete(f"{MEMBERS}/olive").status_code == 409
    assert roles(project)["olive"] == Role.AUTHOR
    send(bearer(owner), "put", f"{MEMBERS}/nora", {"role": "author"})
    assert bearer(owner).delete(f"{MEMBERS}/olive").status_code == 204


def test_it_refuses_a_bad_role_or_user(project: Project, owner: User) -> None:
    client = bearer(owner)
    bad_role = send(client, "put", f"{MEMBERS}/rita", {"role": "admin"})
    assert bad_role.status_code == 400 and "author, reviewer, viewer" in bad_role.json()["detail"]
    assert send(client, "put", f"{MEMBERS}/ghost", {"role": "viewer"}).status_code == 404
    assert send(client, "put", f"{MEMBERS}/rita", {}).status_code == 422
    assert send(client, "put", "/api/projects/nope/members/rita", {"role": "viewer"}).status_code == 404


def test_it_requires_authentication_for_members(project: Project) -> None:
    assert Client().get(MEMBERS).status_code == 401
    assert send(Client(), "put", f"{MEMBERS}/rita", {"role": "author"}).status_code == 401
    assert Client().delete(f"{MEMBERS}/rita").status_code == 401
    assert roles(project)["rita"] == "reviewer"


def test_it_refuses_a_deployment_token(project: Project, staff: User) -> None:
    from studio.deployments.models import Deployment

    deployment = Deployment.objects.create(project=project, name="triage-prod", version="v", created_by=staff)
    _, token = ApiToken.issue(staff, "deploy", deployment=deployment)
    client = Client(headers={"Authorization": f"Bearer {token}"})
    assert client.get("/api/users").status_code == 403
    assert send(client, "post", "/api/users", {"username": "ivy"}).status_code == 403
    assert client.get(MEMBERS).status_code == 403
    assert send(client, "put", f"{MEMBERS}/rita", {"role": "author"}).status_code == 403
    assert roles(project)["rita"] == "reviewer" and not User.objects.filter(username="ivy").exists()


# -- naming a user reveals nothing (issue 22) --


def _answers(client: Client, name: str) -> list[tuple[int, bytes]]:
    put = send(client, "put", f"{MEMBERS}/{name}", {"role": "viewer"})
    bad_role = send(client, "put", f"{MEMBERS}/{name}", {"role": "admin"})
    gone = client.delete(f"{MEMBERS}/{name}")
    return [(a.status_code, a.content) for a in (put, bad_role, gone)]


@pytest.mark.parametrize("persona", ["stranger", "viewer", "reviewer"])
def test_it_answers_a_non_author_the_same_whatever_the_username(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    make_user("exists")
    client = bearer(request.getfixturevalue(persona))
    assert _answers(client, "exists") == _answers(client, "no-such-user")
    assert roles(project).get("exists") is None


def test_an_author_learns_nothing_of_users_outside_their_projects(project: Project, stranger: User) -> None:
    """A plain user with a project of their own could learn which usernames exist by
    adding them: now a user they share no project with is answered as no user at all."""
    mine = make_user("mallory")
    own = Project.objects.create(slug="own", name="Own", created_by=mine)
    Membership.objects.create(user=mine, project=own, role=Role.AUTHOR)
    client = bearer(mine)
    answers = {}
    for name in ("olive", "sam", "no-such-user"):
        put = send(client, "put", f"/api/projects/own/members/{name}", {"role": "viewer"})
        gone = client.delete(f"/api/projects/own/members/{name}")
        answers[name] = [(put.status_code, put.content), (gone.status_code, gone.content)]
    assert answers["olive"] == answers["sam"] == answers["no-such-user"]
    assert answers["sam"][0][0] == 404
    assert Membership.objects.filter(project=own).count() == 1


def test_staff_add_anyone(project: Project, staff: User, stranger: User) -> None:
    assert send(bearer(staff), "put", f"{MEMBERS}/sam", {"role": "viewer"}).status_code == 201
    assert roles(project)["sam"] == "viewer"
