"""Result pages at 10,000 case runs: every page answers in a bounded number of queries.

How long they take is a benchmark's question, not a test's (a busy CI machine is not a
regression): benchmarks/result_pages.py times the same pages on the same rows."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from studio.evals.models import Eval
from studio.evals.results.nodes import node_stats
from studio.projects.models import Project
from tests.support.eval_results import fill_eval, make_eval

RUNS = 10_000
MAX_QUERIES = 25


PAGES = (
    "summary",
    "blame",
    "coverage",
    "tiers",
    "cost?sort=latency&dir=desc",
    "cost?sort=tokens&dir=asc&page=40",
    "cases/case-00004/0",
)


def test_it_answers_every_page_in_a_bounded_number_of_queries_at_10k_runs(
    as_owner: Client, project: Project, owner: User, django_assert_max_num_queries: Any
) -> None:
    ev = make_eval(project, owner, ago_s=60)
    fill_eval(ev, RUNS, traces=True)
    other = make_eval(project, owner)
    fill_eval(other, RUNS, traces=False)
    urls = [f"/p/{project.slug}/evals/{ev.pk}/{page}" for page in PAGES]
    urls += [f"/p/{project.slug}/evals/compare?a={ev.pk}&b={other.pk}", f"/p/{project.slug}/evals/history"]
    for url in urls:
        for cold in (True, False):  # a cold cache, then the cached answer
            if cold:
                cache.clear()
            headers = {"HX-Request": "true", "HX-Target": "cost-table"} if "page=40" in url else {}
            with django_assert_max_num_queries(MAX_QUERIES):
                response = as_owner.get(url, headers=headers)
            assert response.status_code == 200, url
    # As the backend leaves a done eval: its per-node totals stored in the summary.
    Eval.objects.filter(pk=ev.pk).update(summary={"node_stats": node_stats(ev)})
    cache.clear()
    with django_assert_max_num_queries(MAX_QUERIES):
        assert as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").status_code == 200
