"""The users page (staff) and a project's Members tab."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import Membership
from studio.projects.models import Project
from tests.support.studio import HTMX, client_for, make_colleague, make_user

PAGE = "/p/triage/members/"


def roles(project: Project) -> dict[str, str]:
    return {m.user.username: m.role for m in Membership.objects.filter(project=project).select_related("user")}


# -- /users/ --


def test_it_invites_a_user_from_the_users_page(as_staff: Client) -> None:
    shown = as_staff.post("/users/", {"username": "ivy", "email": "ivy@example.com"})
    assert shown.status_code == 200
    assert b'id="invite-link"' in shown.content and b"http://testserver/invite/" in shown.content
    assert not User.objects.get(username="ivy").has_usable_password()
    listed = as_staff.get("/users/")
    assert (
        b"ivy" in listed.content
        and b"not yet (invited)" in listed.content
        and b'id="invite-link"' not in listed.content
    )


def test_it_makes_a_new_link_from_the_users_page(as_staff: Client, owner: User) -> None:
    shown = as_staff.post(f"/users/{owner.pk}/link")
    assert shown.status_code == 200 and b"Send this link to olive" in shown.content


def test_it_says_why_an_invite_was_refused(as_staff: Client, owner: User) -> None:
    taken = as_staff.post("/users/", {"username": "olive"}, follow=True)
    assert b"a user named &#x27;olive&#x27; exists" in taken.content
    assert User.objects.filter(username="olive").count() == 1


@pytest.mark.parametrize("persona", ["owner", "reviewer", "viewer", "stranger"])
def test_it_shows_the_users_page_to_staff_only(request: pytest.FixtureRequest, project: Project, persona: str) -> None:
    client = client_for(request.getfixturevalue(persona))
    assert client.get("/users/").status_code == 403
    assert client.post("/users/", {"username": "ivy"}).status_code == 403
    assert not User.objects.filter(username="ivy").exists()


def test_it_sends_anonymous_visitors_to_log_in(project: Project, owner: User) -> None:
    assert Client().get("/users/")["Location"].startswith("/login/")
    assert Client().get(PAGE)["Location"].startswith("/login/")
    for url in ("/users/", f"/users/{owner.pk}/link", f"{PAGE}set", f"{PAGE}remove"):
        assert Client().post(url, {"username": "rita", "role": "author"})["Location"].startswith("/login/")
    assert roles(project)["rita"] == "reviewer" and not User.objects.filter(username="rita", is_staff=True).exists()


def test_it_refuses_a_forged_or_stale_set_password_link(owner: User) -> None:
    forged = Client().get(f"/invite/{owner.pk}/not-a-token/", follow=True)
    assert forged.status_code == 200 and b'id="link-spent"' in forged.content


def test_it_links_the_users_page_for_staff_only(as_staff: Client, as_owner: Client, project: Project) -> None:
    assert b'href="/users/"' in as_staff.get("/").content
    assert b'href="/users/"' not in as_owner.get("/").content


# -- /p/<slug>/members/ --


@pytest.mark.parametrize("persona", ["owner", "staff"])
def test_it_shows_the_member_forms_to_authors_and_staff(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    shown = client_for(request.getfixturevalue(persona)).get(PAGE)
    assert shown.status_code == 200
    assert b'id="add-member"' in shown.content and b"rita" in shown.content
    assert (b"people you already share a project with" in shown.content) == (persona == "owner")


@pytest.mark.parametrize("persona", ["reviewer", "viewer"])
def test_it_shows_members_read_only_to_other_members(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    shown = client_for(request.getfixturevalue(persona)).get(PAGE)
    assert shown.status_code == 200
    assert b"olive" in shown.content and b'id="add-member"' not in shown.content and b"Remove" not in shown.content


def test_it_hides_the_members_page_from_a_stranger(project: Project, as_stranger: Client) -> None:
    assert as_stranger.get(PAGE).status_code == 404
    assert as_stranger.post(f"{PAGE}set", {"username": "sam", "role": "author"}).status_code == 404
    assert "sam" not in roles(project)


def test_it_answers_an_htmx_tab_swap_with_the_section(as_owner: Client, project: Project) -> None:
    swapped = as_owner.get(PAGE, headers=HTMX)
    assert swapped.status_code == 200
    assert b'id="project-page"' in swapped.content and b'class="top"' not in swapped.content


@pytest.mark.parametrize("persona", ["owner", "staff"])
def test_it_adds_changes_and_removes_a_member(
    request: pytest.FixtureRequest, project: Project, owner: User, persona: str
) -> None:
    make_colleague("nora", of=owner)
    client = client_for(request.getfixturevalue(persona))
    added = client.post(f"{PAGE}set", {"username": "nora", "role": "viewer"}, follow=True)
    assert b"nora is now viewer of triage" in added.content and roles(project)["nora"] == "viewer"
    client.post(f"{PAGE}set", {"username": "nora", "role": "reviewer"})
    assert roles(project)["nora"] == "reviewer"
    removed = client.post(f"{PAGE}remove", {"username": "nora"}, follow=True)
    assert b"nora is no longer a member" in removed.content and "nora" not in roles(project)


@pytest.mark.parametrize("persona", ["reviewer", "viewer"])
def test_it_refuses_member_changes_by_a_non_author(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    client = client_for(request.getfixturevalue(persona))
    assert client.post(f"{PAGE}set", {"username": "victor", "role": "author"}).status_code == 403
    assert client.post(f"{PAGE}remove", {"username": "olive"}).status_code == 403
    assert roles(project) == {"olive": "author", "rita": "reviewer", "victor": "viewer"}


def test_it_says_why_a_member_change_was_refused(as_owner: Client, project: Project) -> None:
    unknown = as_owner.post(f"{PAGE}set", {"username": "ghost", "role": "viewer"}, follow=True)
    assert b"no user named &#x27;ghost&#x27; that you can add" in unknown.content
    make_user("sam")  # exists, but shares no project with the owner: the same sentence
    stranger = as_owner.post(f"{PAGE}set", {"username": "sam", "role": "viewer"}, follow=True)
    assert b"no user named &#x27;sam&#x27; that you can add" in stranger.content and "sam" not in roles(project)
    last = as_owner.post(f"{PAGE}remove", {"username": "olive"}, follow=True)
    assert b"last author" in last.content and roles(project)["olive"] == "author"
    bad = as_owner.post(f"{PAGE}set", {"username": "rita", "role": "admin"}, follow=True)
    assert b"role must be one of" in bad.content and roles(project)["rita"] == "reviewer"
