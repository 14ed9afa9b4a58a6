from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.test import Client

from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.storage import PackRepo
from studio.projects.views import example_files
from studio.runs import steps
from studio.runs.models import TryRun

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]
URL = "/p/triage/runs/new"
TICKET = {"ticket": "When will order ORD-11873 ship? The page still says 'processing'."}  # st-04's input


def _post(client: Client, project: Project, **fields: Any) -> Any:
    data = {"version": project.head, "endpoint": "", "input": json.dumps(TICKET), **fields}
    return client.post(URL, data)


def test_it_shows_the_form_prefilled_from_the_first_evalset_case(as_owner: Client, project: Project) -> None:
    page = as_owner.get(URL)
    assert page.status_code == 200
    assert b"I was charged TWICE for order ORD-48213" in page.content  # case st-01's input
    assert f'value="{project.head}" selected'.encode() in page.content
    assert b"the pack&#x27;s own model (fake:fakes/scripted.json)" in page.content


def test_it_starts_a_run_and_queues_its_task(
    as_owner: Client, project: Project, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        page = _post(as_owner, project)
    run = TryRun.objects.get()
    assert page.status_code == 302 and page["Location"] == f"/p/{run.project.slug}/runs/{run.pk}"
    assert len(callbacks) == 1
    assert (run.status, run.version, run.input, run.endpoint) == ("queued", project.head, TICKET, None)
    assert run.model_spec == "fake:fakes/scripted.json"


def test_it_runs_against_a_chosen_endpoint(as_owner: Client, project: Project, scripted: Endpoint) -> None:
    page = _post(as_owner, project, endpoint=str(scripted.pk))
    assert page.status_code == 302
    assert TryRun.objects.get().endpoint == scripted


def test_it_runs_an_older_version(as_owner: Client, project: Project, owner: object) -> None:
    first = project.head
    PackRepo(project.repo_path).save(
        {"pack/README.md": b"changed"}, base=first, author="olive", email="", message="Edit readme"
    )
    page = _post(as_owner, project, version=first)
    assert page.status_code == 302 and TryRun.objects.get().version == first


def test_it_runs_the_task_end_to_end(
    as_owner: Client, project: Project, eager: None, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _post(as_owner, project)
    run = TryRun.objects.get()
    assert run.status == "done" and run.output["category"] == "other"  # case st-04's answers
    assert [s["node"] for s in steps.trace_steps(run.trace)] == [
        "classify",
        "extract",
        "sentiment",
        "prioritise",
        "general",
    ]


def test_a_made_up_input_fails_on_the_scripted_model_with_its_words_on_the_page(
    as_owner: Client, project: Project, eager: None, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _post(as_owner, project, input=json.dumps({"ticket": "Where is my parcel? It is a week late."}))
    run = TryRun.objects.get()
    words = (
        "model backend: scripted model fakes/scripted.json has no answer for node 'classify': the input matches "
        "none of its 15 cases and 15 inputs; a scripted model only answers the inputs it was written for (use a "
        "real model, e.g. --model openai:..., for other inputs)"
    )
    assert (run.status, run.error, run.output) == ("failed", words, None)
    html = as_owner.get(f"/p/{project.slug}/runs/{run.pk}").content.decode()
    assert '<p class="error" id="run-error">' + words.replace("'", "&#x27;") + "</p>" in html
    assert "Traceback" not in html and "internal error" not in html


def test_it_refuses_input_that_is_not_json(as_owner: Client, project: Project) -> None:
    page = _post(as_owner, project, input='{"ticket": ')
    assert page.status_code == 400
    assert b"the input is not valid JSON" in page.content
    assert not TryRun.objects.exists()


def test_it_refuses_input_that_is_not_an_object(as_owner: Client, project: Project) -> None:
    page = _post(as_owner, project, input='["a ticket"]')
    assert page.status_code == 400 and b"must be a JSON object" in page.content


def test_it_refuses_an_unknown_version(as_owner: Client, project: Project) -> None:
    page = _post(as_owner, project, version="0" * 40)
    assert page.status_code == 400 and b"Select a valid choice" in page.content


def test_it_explains_why_a_pack_with_tools_cannot_be_tried(as_owner: Client, owner: object) -> None:
    create_project(slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"))
    page = as_owner.get("/p/refunds/runs/new")
    assert page.status_code == 200
    assert b"calls host tools (lookup_order, issue_refund)" in page.content and b"PACKFORGE_TOOLS" in page.content
    head = Project.objects.get(slug="refunds").head
    page = as_owner.post("/p/refunds/runs/new", {"version": head, "input": '{"message": "refund"}'})
    assert page.status_code == 400 and b"calls host tools" in page.content
    assert not TryRun.objects.exists()


def test_it_forbids_viewers_and_reviewers(as_viewer: Client, as_reviewer: Client, project: Project) -> None:
    assert as_viewer.get(URL).status_code == 403
    assert _post(as_viewer, project).status_code == 403
    assert _post(as_reviewer, project).status_code == 403
    assert not TryRun.objects.exists()


def test_it_hides_the_project_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get(URL).status_code == 404
    assert _post(as_stranger, project).status_code == 404


def test_it_needs_a_project(as_owner: Client, project: Project) -> None:
    assert as_owner.get("/runs/new").status_code == 404


def test_it_requires_login(project: Project) -> None:
    page = Client().get(URL)
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_refuses_a_pack_whose_own_model_is_a_real_server(as_owner: Client, project: Project, owner: object) -> None:
    """An author could otherwise point the worker at any server with the studio's own
    secrets as the key (key_env=SECRET_KEY): real servers go through endpoints."""
    repo = PackRepo(project.repo_path)
    manifest = repo.files(prefix="pack/")["manifest.yaml"].decode()
    evil = manifest.replace(
        "model: fake:fakes/scripted.json", "model: openai:http://127.0.0.1:9/v1#m;key_env=SECRET_KEY"
    )
    assert evil != manifest
    head = repo.save(
        {"pack/manifest.yaml": evil.encode()}, base=project.head, author="olive", email="", message="point at a server"
    )
    page = _post(as_owner, project, version=head)
    assert page.status_code == 400 and b"is not a scripted model" in page.content
    outside = manifest.replace("model: fake:fakes/scripted.json", "model: fake:../../../var/secret_key")
    head = repo.save(
        {"pack/manifest.yaml": outside.encode()}, base=head, author="olive", email="", message="read a file outside"
    )
    page = _post(as_owner, project, version=head)
    assert page.status_code == 400 and b"names a file outside the pack" in page.content
    assert not TryRun.objects.exists()


def test_it_says_the_model_is_scripted_by_case_and_offers_the_evalset_cases(as_owner: Client, project: Project) -> None:
    page = as_owner.get(URL)
    html = page.content.decode()
    assert 'id="case-keyed"' in html and "scripted by evalset case" in html
    assert '<option value="st-01" data-input="' in html and '<option value="st-06"' in html


def test_it_prefills_the_chosen_evalset_case(as_owner: Client, project: Project) -> None:
    html = as_owner.get(URL + "?case=st-03").content.decode()
    assert "jane.new@example.com" in html.split('name="input"')[1]  # case st-03's input, in the textarea
    assert '<option value="st-03" data-input=' in html and 'value="st-03" data-input="' in html


def test_it_does_not_claim_a_script_without_cases_is_scripted_by_case(as_owner: Client, owner: object) -> None:
    files = example_files("support_triage")
    script = json.loads(files["fakes/scripted.json"])
    del script["cases"]
    files["fakes/plain.json"] = json.dumps(script).encode()
    files["manifest.yaml"] = files["manifest.yaml"].replace(b"fake:fakes/scripted.json", b"fake:fakes/plain.json")
    create_project(slug="plain", name="Plain", owner=owner, pack_files=files)
    html = as_owner.get("/p/plain/runs/new").content.decode()
    assert 'id="case-keyed"' not in html
