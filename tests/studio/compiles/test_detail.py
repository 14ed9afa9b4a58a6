"""A compile's page (live progress, polled until it ends; the attempt history; cancel)
and an attempt's page (the plan as a graph, the eval summary with blame, the diff
against the project's pack, Adopt)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.compiles import worker
from studio.compiles.models import Compile
from studio.compiles.start import start_compile
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn
from tests.support.studio import HTMX, client_for


@pytest.fixture
def finished(project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]) -> Compile:
    stand_in(TWO_ATTEMPTS)
    c = start_compile(project, user=owner)
    assert worker.run_compile(c.pk) == "done"
    c.refresh_from_db()
    return c


def page_of(c: Compile) -> str:
    return f"/p/triage/compiles/{c.pk}/"


# -- the compile's page -----------------------------------------------------------------------


def test_the_compile_and_attempt_pages_carry_the_projects_tabs(as_viewer: Client, finished: Compile) -> None:
    for url in (page_of(finished), f"{page_of(finished)}attempts/1/"):
        page = as_viewer.get(url).content.decode()
        nav = page[page.index('<nav class="tabs project-nav"') :]
        nav = nav[: nav.index("</nav>")]
        assert 'href="/p/triage/compiles/"' in nav and 'href="/p/triage/files/"' in nav, url


def test_it_shows_the_progress_and_the_attempts(as_viewer: Client, finished: Compile) -> None:
    response = as_viewer.get(page_of(finished))

    text = response.content.decode()
    assert response.status_code == 200
    assert 'id="compile-status">done<' in text and 'id="compile-full-marks"' in text
    assert 'id="live-stage">done<' in text and 'id="live-tokens">200<' in text
    assert 'id="attempt-1"' in text and 'id="attempt-2"' in text and ">best<" in text
    assert f"/p/triage/compiles/{finished.pk}/attempts/1/" in text
    assert "hx-trigger" not in text  # ended: no poller
    assert 'id="compile-cancel"' not in text


def test_it_polls_a_running_compile_and_stops_once_it_ended(
    as_owner: Client, project: Project, owner: User, finished: Compile
) -> None:
    running = Compile.objects.create(
        project=project, version=finished.version, created_by=owner, status="running", attempt=2, stage="plan"
    )

    fragment = as_owner.get(page_of(running), headers=HTMX)
    assert fragment.status_code == 200
    text = fragment.content.decode()
    assert text.lstrip().startswith('<div id="compile-progress"') and 'hx-trigger="every 1s"' in text
    assert 'id="live-stage">plan<' in text and 'id="compile-cancel"' in text

    ended = as_owner.get(page_of(finished), headers=HTMX)
    assert ended.status_code == 286  # htmx stops polling


def test_it_hides_a_compile_from_a_stranger_and_under_another_slug(
    as_stranger: Client, as_owner: Client, finished: Compile, owner: User
) -> None:
    assert as_stranger.get(page_of(finished)).status_code == 404
    assert as_stranger.get(f"{page_of(finished)}attempts/1/").status_code == 404
    assert as_owner.get(f"/p/other/compiles/{finished.pk}/").status_code == 404
    assert as_owner.get(f"{page_of(finished)}attempts/9/").status_code == 404


def test_it_lets_an_author_cancel_a_running_compile(as_owner: Client, project: Project, owner: User) -> None:
    c = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="queued")

    response = as_owner.post(f"{page_of(c)}cancel", headers=HTMX)

    assert response.status_code == 200 and 'id="compile-status">cancelled<' in response.content.decode()
    c.refresh_from_db()
    assert (c.status, c.cancel_requested) == ("cancelled", True)


def test_it_refuses_a_cancel_by_a_reviewer_and_a_get(as_reviewer: Client, as_owner: Client, finished: Compile) -> None:
    assert as_reviewer.post(f"{page_of(finished)}cancel").status_code == 403
    assert as_owner.get(f"{page_of(finished)}cancel").status_code == 405


def test_it_marks_a_running_compile_cancelling_until_its_worker_stops(
    as_owner: Client, project: Project, owner: User
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    c = Compile.objects.create(
        project=project,
        version="a" * 40,
        created_by=owner,
        status="running",
        lease_owner="worker-token",
        lease_until=timezone.now() + timedelta(minutes=1),
    )

    response = as_owner.post(f"{page_of(c)}cancel")

    assert response.status_code == 302
    c.refresh_from_db()
    assert (c.status, c.cancel_requested) == ("running", True)  # its worker's watcher stops the loop
    assert "Cancelling" in as_owner.get(page_of(c)).content.decode()


# -- an attempt's page ------------------------------------------------------------------------


def test_it_draws_the_attempts_plan_with_its_blame(as_viewer: Client, finished: Compile) -> None:
    response = as_viewer.get(f"{page_of(finished)}attempts/1/")

    text = response.content.decode()
    assert response.status_code == 200
    assert '<svg class="graph heat"' in text and 'data-node="prioritise"' in text
    assert "9 of 15 gold cases pass" in text
    assert '<td class="mono">prioritise</td><td>6</td><td>100%</td>' in text
    assert "untaken" in text and "prioritise -&gt; review (on_fail)" in text
    assert "&quot;name&quot;: &quot;support_triage&quot;" in text  # the plan document, as JSON
    assert 'id="adopt-form"' not in text  # a viewer cannot adopt


def test_it_shows_the_attempts_pack_against_the_projects_pack(as_owner: Client, finished: Compile) -> None:
    same = as_owner.get(f"{page_of(finished)}attempts/1/").content.decode()
    assert "No files differ." in same

    changed = as_owner.get(f"{page_of(finished)}attempts/2/").content.decode()
    assert "prompts/classify.txt" in changed and "Pick exactly ONE category" in changed
    assert 'id="adopt-form"' in changed and "Adopt attempt 2" in changed


def test_it_says_when_an_attempt_emitted_no_pack(
    as_owner: Client, project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in([Scripted(0.0, (), None, status="plan_invalid")])
    c = start_compile(project, user=owner)
    worker.run_compile(c.pk)

    text = as_owner.get(f"{page_of(c)}attempts/1/").content.decode()

    assert "This attempt emitted no pack." in text and "is not a spec output" in text
    assert 'id="adopt-form"' not in text


# -- adopt -----------------------------------------------------------------------------------


def test_it_adopts_an_attempt_as_a_proposal_naming_the_spec_version_and_attempt(
    as_owner: Client, project: Project, finished: Compile
) -> None:
    repo = PackRepo(project.repo_path)
    before = repo.head()
    evalset = repo.files(before, prefix="pack/")["evalset.jsonl"]

    response = as_owner.post(f"{page_of(finished)}attempts/2/adopt")

    assert response.status_code == 302 and response["Location"] == "/p/triage/proposals/1"
    assert repo.head() == before  # main waits for the review
    proposal = Proposal.objects.get()
    assert (proposal.source, proposal.base) == ("compile", before)
    head = repo.repo[proposal.head.encode()]
    assert [p.decode() for p in head.parents] == [before]  # one commit  # type: ignore[attr-defined]
    message = head.message.decode()  # type: ignore[attr-defined]
    assert f"compile #{finished.pk} attempt 2" in message
    assert finished.version in message and finished.version[:10] in message.splitlines()[0]
    pack = repo.files(proposal.head, prefix="pack/")
    attempt = finished.attempt_rows.get(number=2)
    wanted = {**attempt.pack_files, "evalset.jsonl": evalset.decode()}  # one gold: the project's evalset stays
    assert {p: d.decode() for p, d in pack.items()} == wanted


def test_it_removes_pack_files_the_attempt_does_not_have(as_owner: Client, project: Project, finished: Compile) -> None:
    repo = PackRepo(project.repo_path)
    repo.save({"pack/notes.txt": b"old notes\n"}, base=repo.head(), author="Tess", email="t@x", message="Notes")

    assert as_owner.post(f"{page_of(finished)}attempts/1/adopt").status_code == 302

    assert "notes.txt" not in repo.files(Proposal.objects.get().head, prefix="pack/")


def test_it_says_when_there_is_nothing_to_adopt(as_owner: Client, finished: Compile) -> None:
    response = as_owner.post(f"{page_of(finished)}attempts/1/adopt")  # attempt 1's pack is the project's pack

    assert response.status_code == 409 and not Proposal.objects.exists()
    assert "already attempt 1&#x27;s pack" in response.content.decode()


def test_it_lets_only_authors_adopt(
    as_reviewer: Client, as_viewer: Client, as_stranger: Client, project: Project, finished: Compile
) -> None:
    head = PackRepo(project.repo_path).head()
    url = f"{page_of(finished)}attempts/2/adopt"

    assert as_reviewer.post(url).status_code == 403
    assert as_viewer.post(url).status_code == 403
    assert as_stranger.post(url).status_code == 404
    assert PackRepo(project.repo_path).head() == head


def test_it_needs_a_post_with_a_csrf_token_to_adopt(owner: User, project: Project, finished: Compile) -> None:
    url = f"{page_of(finished)}attempts/2/adopt"
    strict = client_for(owner)
    strict.handler.enforce_csrf_checks = True

    assert strict.get(url).status_code == 405
    assert strict.post(url).status_code == 403  # no CSRF token
    assert PackRepo(project.repo_path).log(limit=1)[0].message.startswith("Create")


def test_it_never_adopts_over_a_save_made_since_the_diff_was_shown(
    as_owner: Client, project: Project, finished: Compile
) -> None:
    repo = PackRepo(project.repo_path)
    seen = repo.head()
    assert f'name="base" value="{seen}"' in as_owner.get(f"{page_of(finished)}attempts/2/").content.decode()
    teammate = repo.save({"pack/notes.txt": b"mine\n"}, base=seen, author="Tess", email="t@x", message="Notes")

    response = as_owner.post(f"{page_of(finished)}attempts/2/adopt", {"base": seen})

    assert response.status_code == 302
    assert repo.head() == teammate  # main keeps the teammate's save; the proposal starts at what was shown
    assert Proposal.objects.get().base == seen
