"""The project's Compile tab (studio.compiles.views.compiles_list): the list of compiles
for every member, the start form for authors, and what a start refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.compiles.models import Compile
from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.storage import PackRepo
from studio.projects.views import example_files
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn
from tests.support.studio import HTMX

URL = "/p/triage/compiles/"


def test_it_shows_authors_the_start_form_and_the_compiles(as_owner: Client, project: Project, owner: User) -> None:
    done = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="done", best_attempt=2)

    response = as_owner.get(URL)

    assert response.status_code == 200
    text = response.content.decode()
    assert 'id="compile-start"' in text and "rules: the model-free planner" in text
    # The id, not #1: Postgres does not reuse ids of rolled-back tests.
    assert f"#{done.pk}" in text and "done" in text and 'aria-current="page">Compile</a>' in text


def test_it_shows_a_viewer_the_compiles_without_the_form(as_viewer: Client, project: Project) -> None:
    response = as_viewer.get(URL)

    assert response.status_code == 200
    assert 'id="compile-start"' not in response.content.decode()


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get(URL).status_code == 404
    assert as_stranger.post(URL, {}).status_code == 404


def test_it_refuses_a_start_by_a_reviewer(as_reviewer: Client, project: Project) -> None:
    assert as_reviewer.post(URL, {}).status_code == 403
    assert not Compile.objects.exists()


def test_it_requires_login(client: Client, project: Project) -> None:
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_swaps_only_the_project_section_for_htmx(as_owner: Client, project: Project) -> None:
    response = as_owner.get(URL, headers=HTMX)
    text = response.content.decode()
    assert response.status_code == 200 and text.lstrip().startswith('<div id="project-page">')


def test_it_starts_a_compile_and_runs_it(
    as_owner: Client,
    project: Project,
    stand_in: Callable[[list[Scripted]], StandIn],
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    fake = stand_in(TWO_ATTEMPTS)

    with django_capture_on_commit_callbacks(execute=True):
        response = as_owner.post(URL, {"planner": "", "target": "", "attempts": "2"})

    c = Compile.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/p/triage/compiles/{c.pk}/"
    assert (c.status, c.planner, c.max_attempts, c.version) == ("done", "rules", 2, PackRepo(project.repo_path).head())
    assert fake.planned == [1, 2]


def test_it_refuses_a_project_without_a_spec(as_owner: Client, owner: User) -> None:
    create_project(slug="nospec", name="No spec", owner=owner, pack_files=example_files("support_triage"))

    response = as_owner.post("/p/nospec/compiles/", {"planner": "", "target": ""})

    assert response.status_code == 400
    assert "this project has no spec" in response.content.decode()
    assert not Compile.objects.exists()


def test_it_refuses_a_spec_that_does_not_load_naming_the_file_and_line(as_owner: Client, project: Project) -> None:
    repo = PackRepo(project.repo_path)
    text = repo.files(None, prefix="spec/")["spec.yaml"].decode().replace("task: >", "tasks: >")
    repo.save({"spec/spec.yaml": text.encode()}, base=repo.head(), author="Tess", email="t@x", message="Break it")

    response = as_owner.post(URL, {"planner": "", "target": ""})

    assert response.status_code == 400
    assert "does not load: spec.yaml:" in response.content.decode()
    assert not Compile.objects.exists()


def test_it_refuses_more_attempts_than_the_studio_allows(as_owner: Client, project: Project, settings: Any) -> None:
    settings.PACKFORGE_COMPILE_MAX_ATTEMPTS = 3

    response = as_owner.post(URL, {"planner": "", "target": "", "attempts": "4"})

    assert response.status_code == 400 and "at most 3 attempts" in response.content.decode()


def test_it_offers_only_endpoints_that_can_plan(
    as_owner: Client, project: Project, staff: User, scripted: Endpoint
) -> None:
    frontier = Endpoint.objects.create(name="frontier", spec="openai:http://127.0.0.1:9/v1#big", created_by=staff)

    text = as_owner.get(URL).content.decode()
    planner = text[text.index('name="planner"') : text.index("</select>", text.index('name="planner"'))]
    assert f'value="{frontier.pk}"' in planner and f'value="{scripted.pk}"' not in planner

    response = as_owner.post(URL, {"planner": str(scripted.pk), "target": ""})
    assert response.status_code == 400 and not Compile.objects.exists()


def test_it_records_the_planner_and_target_endpoints(
    as_owner: Client, project: Project, staff: User, scripted: Endpoint
) -> None:
    frontier = Endpoint.objects.create(name="frontier", spec="openai:http://127.0.0.1:9/v1#big", created_by=staff)

    response = as_owner.post(URL, {"planner": str(frontier.pk), "target": str(scripted.pk)})

    c = Compile.objects.get()
    assert response.status_code == 302
    assert (c.planner, c.planner_endpoint, c.target_endpoint) == ("endpoint", frontier, scripted)
    assert c.planner_label == "endpoint frontier"
