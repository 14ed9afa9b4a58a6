"""The case drill-down: /evals/<id>/cases/<case_id>/<repeat>."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from tests.support.eval_results import add_run, rejected_trace, sample_eval


def test_it_shows_the_trace_node_by_node_to_an_author(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Classify &lt;this&gt; ticket" in text  # the rendered prompt, escaped
    assert "REJECTED-ANSWER-&lt;b&gt;only-authors&lt;/b&gt;" in text  # the rejected generation, escaped
    assert "<b>only-authors</b>" not in text
    assert "category must be one of" in text  # why it was rejected
    assert "classify, step 1, attempt 2" in text  # provenance of the committed value
    assert "lookup_order" in text and "&quot;found&quot;: false" in text  # the tool call and its result
    assert 'request <span class="mono">req-1</span>' in text


def test_it_withholds_rejected_text_from_viewers_and_reviewers(
    as_viewer: Client, as_reviewer: Client, project: Project, owner: User
) -> None:
    ev = sample_eval(project, owner)
    for client in (as_viewer, as_reviewer):
        page = client.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0")
        assert page.status_code == 200
        assert b"REJECTED-ANSWER" not in page.content
        assert b"category must be one of" in page.content  # they still see that, and why
        assert b"Rejected text withheld" in page.content
        assert b"{&quot;category&quot;: &quot;other&quot;}" in page.content  # accepted answers are not hidden


def test_it_shows_a_real_runtime_trace(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(
        f"/p/{ev.project.slug}/evals/{ev.pk}/cases/st-05/0"
    )  # its first priority answer fails the node's assert
    text = page.content.decode()
    assert page.status_code == 200
    assert "prioritise, step 4, attempt 2" in text
    assert "rejected: assert" in text
    assert "prioritise -&gt; billing_ops [category == &#x27;billing&#x27;]" in text


def test_it_404s_an_unknown_case(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/nope/0").status_code == 404
    assert as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/7").status_code == 404


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0").status_code == 404


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0", headers={"HX-Request": "true"})
    assert page.content.decode().lstrip().startswith('<div id="results-page"')


def test_it_shows_what_a_run_that_stopped_early_had_committed(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    trace = rejected_trace("esc-1")  # classify and extract commit, then the run waits for a person
    trace["steps"][-1].update(node="review", kind="human", status="wait")
    trace.update(status="waiting", end_node=None)
    add_run(ev, "esc-1", status="failed", tier="escalated", blamed="extract", trace=trace)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/esc-1/0")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Committed before the run stopped" in text
    table = text[text.index('<table id="committed">') :]
    table = table[: table.index("</table>")]
    assert '<td class="mono">category</td><td class="mono">&quot;other&quot;</td>' in table
    assert '<td class="mono">order_id</td><td class="mono">null</td>' in table
    auto = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/bad-1/0")  # finished in the auto tier
    assert auto.status_code == 200 and b"Committed before the run stopped" not in auto.content


def test_it_shows_a_later_draws_settled_values_beside_its_text(
    as_owner: Client, as_viewer: Client, project: Project, owner: User
) -> None:
    """A quorum's later draw (`sure_fields`) answered some fields only; the page shows
    the first draw's settled values it was completed with, escaped, and withholds them
    with a rejected draw's text."""
    ev = sample_eval(project, owner)
    trace = rejected_trace("sure-1")
    trace["attempts"][1]["given"] = {"name": "<ann>"}
    trace["attempts"][0]["given"] = {"name": "REJECTED-GIVEN"}
    add_run(ev, "sure-1", trace=trace)
    text = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/sure-1/0").content.decode()
    assert (
        "with the first draw's settled values: "
        '<span class="mono">{&quot;name&quot;: &quot;&lt;ann&gt;&quot;}</span>' in text
    )
    assert "REJECTED-GIVEN" in text  # an author reads the rejected draw whole
    viewer = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cases/sure-1/0").content.decode()
    assert "REJECTED-GIVEN" not in viewer and "&lt;ann&gt;" in viewer
