from __future__ import annotations

import yaml
from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, teammate_saves


def test_it_draws_the_graph_and_lists_the_nodes(as_owner: Client, project: Project) -> None:
    page = as_owner.get("/p/triage/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<svg class="graph"' in html
    assert 'data-node="classify"' in html and 'class="node node-generate"' in html
    assert 'class="node node-end" data-node="billing_ops"' in html
    assert "category == &#x27;billing&#x27;" in html  # the `when` label, escaped
    assert 'class="edge edge-on_fail" data-from="classify" data-to="manual_triage"' in html
    assert 'stroke-dasharray="9 4"' in html  # on_fail's dashes
    assert 'class="legend-item legend-on_fail"' in html and "on_fail: taken when the node" in html
    assert '<table id="nodes">' in html and "input.ticket, category, amount_usd, sentiment" in html
    assert "fake:fakes/scripted.json" in html  # the manifest
    assert project.head[:10] in html  # the head commit
    for link in (
        "/p/triage/files/",
        "/p/triage/evalset/",
        "/p/triage/history/",
        "/p/triage/download/",
        "/p/triage/runs/new",
    ):
        assert f'href="{link}' in html


def test_it_calls_a_fallback_edge_otherwise_and_a_lone_edge_always(as_owner: Client, project: Project) -> None:
    html = as_owner.get("/p/triage/").content.decode()
    edges = html[html.index('<table id="edges">') :]
    rows = edges[: edges.index("</table>")].split("<tr>")
    general = next(r for r in rows if '<td class="mono">general</td>' in r)
    assert "otherwise (no edge above matched)" in general  # after three conditional edges from prioritise
    to_prioritise = next(r for r in rows if '<td class="mono">sentiment</td><td class="mono">prioritise</td>' in r)
    assert ">always<" in to_prioritise


def test_it_shows_every_node_kind_with_its_shape(as_owner: Client, owner: object) -> None:
    from studio.projects.models import create_project
    from studio.projects.views import example_files

    create_project(slug="refunds", name="Refunds", owner=owner, pack_files=example_files("refund_desk"))
    html = as_owner.get("/p/refunds/").content.decode()
    for kind in ("generate", "assert", "tool", "human", "end"):
        assert f'class="node node-{kind}"' in html
    assert 'class="edge edge-on_unsure" data-from="approve" data-to="review"' in html


def test_it_escapes_pack_text_in_the_svg(as_owner: Client, project: Project) -> None:
    repo = PackRepo(project.repo_path)
    graph = repo.files(prefix="pack/")["graph.yaml"].decode()
    graph = graph.replace("when: \"category == 'billing'\"", "when: \"category == '<script>alert(1)</script>'\"")
    teammate_saves(repo, "graph.yaml", graph)
    html = as_owner.get("/p/triage/").content.decode()
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_shows_the_loader_problems_when_the_pack_does_not_load(as_owner: Client, project: Project) -> None:
    teammate_saves(PackRepo(project.repo_path), "grammars/classify.json", "{ not json")
    page = as_owner.get("/p/triage/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<svg class="graph"' not in html
    assert 'id="load-problems"' in html and "grammars/classify.json" in html


def test_it_disables_try_it_and_run_an_eval_with_the_reason_when_the_pack_does_not_load(
    as_owner: Client, project: Project
) -> None:
    html = as_owner.get("/p/triage/").content.decode()
    assert '<a class="tryit" id="try-it" href="/p/triage/runs/new">' in html and "blocked-reason" not in html
    teammate_saves(PackRepo(project.repo_path), "grammars/classify.json", "{ not json")
    for url in ("/p/triage/", "/p/triage/files/", "/p/triage/evalset/", "/p/triage/history/"):
        html = as_owner.get(url).content.decode()
        assert '<button type="button" class="tryit" id="try-it" disabled aria-describedby="blocked-reason">' in html
        assert 'id="run-eval" disabled' in html
        assert "Disabled: the pack does not load: grammars/classify.json" in html, url
    try_page = as_owner.get("/p/triage/runs/new").content.decode()
    assert 'id="try-run" disabled' in try_page and "grammars/classify.json" in try_page
    eval_page = as_owner.get("/p/triage/evals/new").content.decode()
    assert 'id="eval-start-button" disabled' in eval_page and "does not load" in eval_page


def test_it_requires_login(project: Project) -> None:
    page = Client().get("/p/triage/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get("/p/triage/").status_code == 404


def test_it_shows_the_project_to_a_viewer(as_viewer: Client, project: Project) -> None:
    assert as_viewer.get("/p/triage/").status_code == 200


def test_it_answers_404_for_an_unknown_project(as_owner: Client, project: Project) -> None:
    assert as_owner.get("/p/nope/").status_code == 404


def test_it_renders_the_fragment_for_htmx(as_owner: Client, project: Project) -> None:
    full = as_owner.get("/p/triage/").content.decode()
    fragment = as_owner.get("/p/triage/", headers=HTMX).content.decode()
    assert "<html" in full and "<html" not in fragment
    assert fragment.lstrip().startswith('<div id="project-page">')


def test_it_shows_the_description_once_when_the_manifest_says_the_same(as_owner: Client, project: Project) -> None:
    manifest = yaml.safe_load(PackRepo(project.repo_path).files(None)["pack/manifest.yaml"])
    said = " ".join(str(manifest["description"]).split())
    first_words = said[:40]
    Project.objects.filter(pk=project.pk).update(description=said)
    assert as_owner.get("/p/triage/").content.decode().count(first_words) == 1
    Project.objects.filter(pk=project.pk).update(description="Another project text.")
    html = as_owner.get("/p/triage/").content.decode()
    assert html.count(first_words) == 1 and "Another project text." in html  # both, each once
