"""The evalset table (/p/<slug>/evalset/)."""

from __future__ import annotations

import json

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, pack_text, teammate_saves


def test_it_shows_the_cases_as_a_table(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/evalset/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<table id="cases"' in html
    assert '<td class="mono">st-01</td>' in html
    assert "ORD-48213" in html  # input
    assert "classify → extract → sentiment → prioritise → billing_ops" in html  # path
    assert "end: tech_support" in html
    assert 'href="/p/triage/evalset/new"' in html and 'href="/p/triage/evalset/1/"' in html


def test_it_shows_inputs_and_expected_outputs_as_key_value_fields(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    long = "My order never came. " * 10
    teammate_saves(
        repo,
        "evalset.jsonl",
        json.dumps({"id": "long", "input": {"ticket": long}, "expected": {"category": "billing", "amount_usd": 5.5}})
        + "\n",
    )
    html = as_owner.get("/p/triage/evalset/").content.decode()
    assert "<dt>category:</dt><dd>billing</dd>" in html and "<dt>amount_usd:</dt><dd>5.5</dd>" in html
    assert "<dt>ticket:</dt><dd><details><summary>My order never came." in html  # cut, with the whole behind it
    assert f'<span class="full">{long}</span>' in html


def test_it_searches_the_cases(as_owner: Client, project: Project) -> None:
    html = as_owner.get("/p/triage/evalset/?q=espresso").content.decode()
    assert '<td class="mono">st-05</td>' in html and '<td class="mono">st-01</td>' not in html
    assert "1 of 15 cases match" in html
    html = as_owner.get("/p/triage/evalset/?q=ST-0").content.decode()  # ids too, any case
    assert '<td class="mono">st-01</td>' in html
    html = as_owner.get("/p/triage/evalset/?q=nothing-like-this").content.decode()
    assert "No case matches" in html
    fragment = as_owner.get("/p/triage/evalset/?q=espresso", headers=HTMX).content.decode()
    assert 'id="cases-found"' in fragment and "<html" not in fragment


def test_it_shows_a_broken_line_and_the_loaders_problem_beside_its_row(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    text = pack_text(repo, "evalset.jsonl")
    teammate_saves(
        repo,
        "evalset.jsonl",
        text + '{"id": "bad", "input": {"ticket": "x"}, "expected": {}, "end": "nowhere"}\n{not json\n',
    )
    html = as_owner.get("/p/triage/evalset/").content.decode()
    assert "&#x27;end&#x27; names unknown node &#x27;nowhere&#x27;" in html
    assert "is not valid JSON" in html and "{not json" in html


def test_it_escapes_case_text(as_owner: Client, project: Project, repo: PackRepo) -> None:
    teammate_saves(
        repo, "evalset.jsonl", '{"id": "x<b>", "input": {"ticket": "<img src=x onerror=alert(1)>"}, "expected": {}}\n'
    )
    html = as_owner.get("/p/triage/evalset/").content.decode()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "x&lt;b&gt;" in html


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/evalset/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/p/triage/evalset/").status_code == 404


def test_it_shows_a_viewer_the_cases_without_edit_links(as_viewer: Client, project: Project) -> None:
    page = as_viewer.get("/p/triage/evalset/")
    assert page.status_code == 200 and b"st-01" in page.content
    assert b"/evalset/new" not in page.content and b"/delete" not in page.content


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    fragment = as_owner.get("/p/triage/evalset/", headers=HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="project-page">')
