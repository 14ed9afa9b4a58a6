"""The start form, the eval page with its progress poller, and the cancel button. Per
view: it works, a login is needed, a stranger gets 404, a viewer may watch but not start
or cancel (403), bad input gets 400, htmx gets the fragment, and the poller is told to
stop (286) once the eval has ended."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.evals import shared, worker
from studio.evals.models import Eval, EvalCase
from studio.evals.start import cancel_eval, start_eval
from studio.projects.models import Project
from tests.support.studio import client_for, run_all, start

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


# -- start ----------------------------------------------------------------------------------


def test_it_shows_the_start_form(project: Project, as_owner: Client) -> None:
    response = as_owner.get("/p/triage/evals/new")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="eval-start"' in page and "the pack&#x27;s own model" in page and "ladder" in page


def test_it_starts_an_eval_from_the_form(project: Project, as_owner: Client, sent: list[int]) -> None:
    response = as_owner.post(
        "/p/triage/evals/new",
        {"project": "triage", "version": project.head, "endpoints": ["own"], "tags": "ladder, parse", "repeats": "2"},
    )
    ev = Eval.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/p/{ev.project.slug}/evals/{ev.pk}/"
    assert (ev.total, ev.repeats, ev.tags) == (12, 2, ["ladder", "parse"])


def test_it_needs_a_login_to_start(project: Project) -> None:
    response = Client().get("/p/triage/evals/new")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_it_hides_the_start_form_from_a_stranger(project: Project, as_stranger: Client) -> None:
    assert as_stranger.get("/p/triage/evals/new").status_code == 404
    assert as_stranger.get("/evals/new").status_code == 404


def test_it_lets_only_authors_start(project: Project, as_viewer: Client) -> None:
    assert as_viewer.get("/p/triage/evals/new").status_code == 403
    assert (
        as_viewer.post(
            "/p/triage/evals/new",
            {"project": "triage", "version": project.head, "endpoints": ["own"], "repeats": "1"},
        ).status_code
        == 403
    )
    assert not Eval.objects.exists()


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"repeats": "0"}, "greater than or equal to 1"),
        ({"endpoints": []}, "choose at least one model"),
        ({"tags": "nope"}, "no case is selected (tags nope)"),
    ],
)
def test_it_refuses_bad_input(project: Project, as_owner: Client, form: dict[str, Any], message: str) -> None:
    data = {"project": "triage", "version": project.head, "endpoints": ["own"], "repeats": "1", **form}
    response = as_owner.post("/p/triage/evals/new", data)
    assert response.status_code == 400 and message in response.content.decode()
    assert not Eval.objects.exists()


# -- the eval page and its poller ------------------------------------------------------------


def test_it_shows_the_eval_page_with_its_progress(
    project: Project, owner: User, as_owner: Client, sent: list[int]
) -> None:
    ev = start(project, owner)
    worker.run_eval_case(EvalCase.objects.filter(eval=ev).order_by("pk").first().pk)  # type: ignore[union-attr]
    response = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/")
    page = response.content.decode()
    assert response.status_code == 200 and "<html" in page
    assert 'id="eval-progress"' in page and 'hx-trigger="every 1s"' in page
    assert 'id="count-passed">1<' in page and f'id="count-queued">{ev.total - 1}<' in page
    assert 'id="eval-cancel"' in page


def test_it_answers_the_poller_with_the_fragment(
    project: Project, owner: User, as_viewer: Client, sent: list[int]
) -> None:
    ev = start(project, owner)
    response = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/", **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200
    assert fragment.lstrip().startswith('<div id="eval-progress"') and "<html" not in fragment
    assert 'id="eval-cancel"' not in fragment  # viewers watch; they do not cancel


def test_it_stops_the_poller_when_the_eval_ends(
    project: Project, owner: User, as_owner: Client, sent: list[int]
) -> None:
    ev = start(project, owner, tags=["ladder"])
    run_all(ev)
    response = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/", **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in fragment and 'id="count-passed">6<' in fragment
    assert f'href="/p/{ev.project.slug}/evals/{ev.pk}/summary"' in fragment


def test_it_keeps_polling_a_cancelled_eval_until_its_running_cases_stop(
    project: Project, owner: User, as_owner: Client, sent: list[int]
) -> None:
    ev = start(project, owner, tags=["ladder"])
    row = EvalCase.objects.filter(eval=ev).first()
    assert row is not None
    from datetime import timedelta

    from django.utils import timezone

    EvalCase.objects.filter(pk=row.pk).update(
        status="running", lease_owner="alive", lease_until=timezone.now() + timedelta(seconds=30)
    )
    cancel_eval(ev)
    response = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/", **HTMX)
    assert response.status_code == 200 and "running cases are stopping" in response.content.decode()


def test_it_needs_a_login_to_watch(project: Project, owner: User, sent: list[int]) -> None:
    ev = start(project, owner, tags=["parse"])
    response = Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_it_hides_the_eval_page_from_a_stranger(
    project: Project, owner: User, as_stranger: Client, sent: list[int]
) -> None:
    ev = start(project, owner, tags=["parse"])
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/").status_code == 404
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/", **HTMX).status_code == 404
    assert as_stranger.get("/p/triage/evals/999999/").status_code == 404


def test_it_links_the_other_evals_of_a_batch(
    project: Project, owner: User, as_owner: Client, sent: list[int], tmp_path: Any
) -> None:
    from tests.support.studio import scripted_endpoint

    other = scripted_endpoint(tmp_path, owner, {"nodes": {}})
    first, second = start_eval(project, user=owner, endpoints=[None, other.pk], tags=["parse"])
    page = as_owner.get(f"/p/{first.project.slug}/evals/{first.pk}/").content.decode()
    assert f'href="/p/{second.project.slug}/evals/{second.pk}/"' in page and "scripted" in page


# -- cancel ---------------------------------------------------------------------------------


def test_it_cancels_from_the_button(project: Project, owner: User, as_owner: Client, sent: list[int]) -> None:
    ev = start(project, owner)
    response = as_owner.post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel")
    assert response.status_code == 302 and response["Location"] == f"/p/{ev.project.slug}/evals/{ev.pk}/"
    ev.refresh_from_db()
    assert ev.status == "cancelled" and shared.counts_of(ev)["cancelled"] == ev.total


def test_it_answers_an_htmx_cancel_with_the_final_fragment(
    project: Project, owner: User, as_owner: Client, sent: list[int]
) -> None:
    ev = start(project, owner)
    response = as_owner.post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel", **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 286  # nothing was running: the eval has ended
    assert 'id="eval-status">cancelled<' in fragment and 'id="eval-cancel"' not in fragment


def test_it_lets_only_authors_cancel(
    project: Project, owner: User, viewer: User, stranger: User, sent: list[int]
) -> None:
    ev = start(project, owner)
    response = Client().post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client_for(stranger).post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel").status_code == 404
    assert client_for(viewer).post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel").status_code == 403
    assert client_for(owner).get(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel").status_code == 405
    ev.refresh_from_db()
    assert ev.status == "queued"


def test_it_says_so_when_cancelling_an_ended_eval(
    project: Project, owner: User, as_owner: Client, sent: list[int]
) -> None:
    ev = start(project, owner, tags=["parse"])
    run_all(ev)
    response = as_owner.post(f"/p/{ev.project.slug}/evals/{ev.pk}/cancel", follow=True)
    assert "had already ended (done)" in response.content.decode()


def test_it_says_up_front_when_the_pack_needs_tools_the_studio_lacks(
    refunds: Project, as_owner: Client, settings: Any
) -> None:
    settings.PACKFORGE_TOOLS = ""
    page = as_owner.get("/p/refunds/evals/new").content.decode()
    assert 'id="eval-problem"' in page and "PACKFORGE_TOOLS" in page
