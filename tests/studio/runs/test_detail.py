from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import start, worker
from studio.runs.models import TryRun
from tests.support.studio import REJECTED_TEXT

HX = {"HX-Request": "true"}
CASE = {
    "ticket": "Hi, I was charged TWICE for order ORD-48213 ($59.98 each time). I want one of the charges "
    "reversed today or I'm disputing it with my bank."
}


def _run(project: Project, owner: User, endpoint: Endpoint | None = None, *, execute_it: bool = True) -> TryRun:
    run = start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input=CASE)
    if execute_it:
        worker.run_try(run.pk)
    return run


def test_it_shows_the_trace_node_by_node(as_owner: Client, project: Project, owner: User) -> None:
    run = _run(project, owner)
    page = as_owner.get(f"/p/{run.project.slug}/runs/{run.pk}")
    assert page.status_code == 200
    body = page.content.decode()
    for node in ("classify", "extract", "sentiment", "prioritise", "billing_ops"):
        assert f"<b>{node}</b>" in body
    assert "&quot;order_id&quot;: &quot;ORD-48213&quot;" in body and 'id="run-status">done<' in body
    assert "hx-trigger" not in body  # final: nothing to poll


def test_it_polls_while_the_run_is_not_final(as_owner: Client, project: Project, owner: User) -> None:
    run = _run(project, owner, execute_it=False)
    page = as_owner.get(f"/p/{run.project.slug}/runs/{run.pk}")
    assert b'hx-trigger="every 500ms"' in page.content and b"Waiting for the first step" in page.content
    fragment = as_owner.get(f"/p/{run.project.slug}/runs/{run.pk}", headers=HX)
    assert fragment.status_code == 200
    assert fragment.content.lstrip().startswith(b'<div id="run-trace"') and b"<html" not in fragment.content


def test_it_stops_the_poller_when_the_run_is_final(as_owner: Client, project: Project, owner: User) -> None:
    run = _run(project, owner)
    fragment = as_owner.get(f"/p/{run.project.slug}/runs/{run.pk}", headers=HX)
    assert fragment.status_code == 286
    assert b"hx-trigger" not in fragment.content and b"ORD-48213" in fragment.content


def test_it_shows_rejected_text_to_authors_only(
    as_owner: Client, as_viewer: Client, as_reviewer: Client, project: Project, owner: User, stumbling: Endpoint
) -> None:
    run = _run(project, owner, stumbling)
    for_author = as_owner.get(f"/p/{run.project.slug}/runs/{run.pk}").content.decode()
    assert REJECTED_TEXT in for_author
    for reader in (as_viewer, as_reviewer):
        page = reader.get(f"/p/{run.project.slug}/runs/{run.pk}").content.decode()
        assert REJECTED_TEXT not in page and "rejected (parse)" in page  # the reason is for everyone


def test_it_lets_members_view(as_viewer: Client, as_reviewer: Client, project: Project, owner: User) -> None:
    run = _run(project, owner)
    assert as_viewer.get(f"/p/{run.project.slug}/runs/{run.pk}").status_code == 200
    assert as_reviewer.get(f"/p/{run.project.slug}/runs/{run.pk}").status_code == 200


def test_it_hides_runs_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    run = _run(project, owner)
    assert as_stranger.get(f"/p/{run.project.slug}/runs/{run.pk}").status_code == 404
    assert as_stranger.get(f"/p/{run.project.slug}/runs/{run.pk}", headers=HX).status_code == 404


def test_it_answers_404_for_a_missing_run(as_owner: Client, project: Project) -> None:
    assert as_owner.get("/p/triage/runs/999").status_code == 404


def test_it_requires_login(project: Project, owner: User) -> None:
    run = _run(project, owner, execute_it=False)
    page = Client().get(f"/p/{run.project.slug}/runs/{run.pk}")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_a_long_runs_page_shows_one_window_of_steps(as_owner: Client, project: Project, owner: User) -> None:
    run = _run(project, owner, execute_it=False)
    steps = [{"node": "loop", "step": i, "status": "ok", "kind": "code"} for i in range(1, 451)]
    TryRun.objects.filter(pk=run.pk).update(status="running", trace={"status": "running", "steps": steps}, trace_rev=1)
    url = f"/p/{project.slug}/runs/{run.pk}"
    body = as_owner.get(url).content.decode()
    assert body.count("<b>loop</b>") == 200 and "Steps 1 to 200 of 450" in body
    assert 'href="?steps_from=200">Later steps' in body and "Earlier steps" not in body
    tail = as_owner.get(f"{url}?steps_from=400").content.decode()
    assert tail.count("<b>loop</b>") == 50 and "Steps 401 to 450 of 450" in tail
    assert 'href="?steps_from=200">Earlier steps' in tail and "Later steps" not in tail
    assert f'hx-get="{url}?steps_from=400"' in tail  # the poll keeps the window the reader chose
    for odd in ("-3", "\u00b2", "x"):  # not a whole number written in ASCII digits: the first window
        got = as_owner.get(url, {"steps_from": odd})
        assert got.status_code == 200 and "Steps 1 to 200 of 450" in got.content.decode()
    past = as_owner.get(f"{url}?steps_from=1000").content.decode()
    assert "No steps from 1001: the run has 450" in past and 'href="?steps_from=250">Earlier steps' in past
