"""The cost page: /evals/<id>/cost (histogram + sortable table)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import Project
from tests.support.eval_results import add_run, make_eval, sample_eval


def _order(text: str, names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: text.index(f">{n}</a>"))


def test_it_draws_a_histogram_and_sorts_the_table_without_javascript(
    as_owner: Client, project: Project, owner: User
) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "cheap", cost=0.001, latency=3.0)
    add_run(ev, "dear", cost=0.009, latency=1.0)
    add_run(ev, "mid", cost=0.005, latency=2.0)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost")
    assert page.status_code == 200
    text = page.content.decode()
    assert '<g class="bin">' in text and "Cost per case run (USD)" in text
    assert _order(text, ["cheap", "dear", "mid"]) == ["dear", "mid", "cheap"]  # cost, most expensive first
    assert (
        f'href="/p/{ev.project.slug}/evals/{ev.pk}/cost?sort=latency&amp;dir=desc"' in text
    )  # plain links carry the sort
    by_latency = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost?sort=latency&dir=asc").content.decode()
    assert _order(by_latency, ["cheap", "dear", "mid"]) == ["dear", "mid", "cheap"]


def test_it_ignores_an_unknown_sort_column(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost?sort=trace&dir=x&page=banana")
    assert page.status_code == 200
    assert b"sorted by cost desc" in page.content


def test_it_swaps_only_the_table_for_htmx(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(
        f"/p/{ev.project.slug}/evals/{ev.pk}/cost?sort=tokens&dir=asc",
        headers={"HX-Request": "true", "HX-Target": "cost-table"},
    )
    text = page.content.decode()
    assert text.lstrip().startswith('<div id="cost-table"')
    assert "<svg" not in text and "sorted by tokens asc" in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost").status_code == 404


def test_it_lets_a_viewer_read(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost").status_code == 200


def test_it_pages_a_long_table(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    for i in range(130):
        add_run(ev, f"c{i:03d}", cost=i / 1000)
    first = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost").content.decode()
    assert "page 1 of 2" in first and ">c129</a>" in first and ">c000</a>" not in first
    second = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/cost?sort=cost&dir=desc&page=2").content.decode()
    assert ">c000</a>" in second
