"""Comparing two evals: /p/{project.slug}/evals/compare?a=<id>&b=<id>."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import Membership, Role
from studio.evals.models import Eval
from studio.projects.models import Project, create_project
from studio.projects.views import example_files
from tests.support.eval_results import add_run, make_eval


def _pair(project: Project, owner: User) -> tuple[Eval, Eval]:
    a, b = make_eval(project, owner, ago_s=60), make_eval(project, owner)
    for i, (was, now) in enumerate([(True, True)] * 5 + [(False, False)] * 2 + [(False, True)] + [(True, False)] * 8):
        add_run(a, f"case-{i:02d}", status="passed" if was else "failed")
        add_run(b, f"case-{i:02d}", status="passed" if now else "failed")
    return a, b


def test_it_shows_deltas_fixed_and_broken_cases_and_the_mcnemar_p(
    as_owner: Client, project: Project, owner: User
) -> None:
    a, b = _pair(project, owner)
    page = as_owner.get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert '<div class="big" id="p-value">0.0391</div>' in text  # 2 * (1 + 9) / 2^9
    fixed = text[text.index('id="fixed"') : text.index("</ul>", text.index('id="fixed"'))]
    assert "case-07" in fixed and "case-08" not in fixed
    assert "-43.8 pp" in text  # pass rate 12/16 -> 6/16


def test_it_refuses_evals_of_different_projects(as_owner: Client, project: Project, owner: User) -> None:
    other = create_project(slug="other", name="Other", owner=owner, pack_files=example_files("support_triage"))
    a, b = make_eval(project, owner), make_eval(other, owner)
    page = as_owner.get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}")
    assert page.status_code == 400
    assert b"only evals of one project" in page.content


def test_it_refuses_different_case_sets(as_owner: Client, project: Project, owner: User) -> None:
    a, b = make_eval(project, owner), make_eval(project, owner)
    add_run(a, "x")
    add_run(a, "y")
    add_run(b, "x")
    page = as_owner.get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}")
    assert page.status_code == 400
    assert b"different case sets" in page.content and b"(y)" in page.content


def test_it_asks_for_two_evals(as_owner: Client, project: Project) -> None:
    page = as_owner.get(f"/p/{project.slug}/evals/compare?a=1")
    assert page.status_code == 400
    assert b"Choose two evals" in page.content


def test_it_requires_login(project: Project, owner: User) -> None:
    a, b = _pair(project, owner)
    assert Client().get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}").status_code == 302


def test_it_hides_either_eval_from_strangers(
    as_stranger: Client, stranger: User, project: Project, owner: User
) -> None:
    a, b = _pair(project, owner)
    assert as_stranger.get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}").status_code == 404
    mine = create_project(slug="mine", name="Mine", owner=stranger, pack_files=example_files("support_triage"))
    own = make_eval(mine, stranger)
    assert as_stranger.get(f"/p/{mine.slug}/evals/compare?a={own.pk}&b={b.pk}").status_code == 404  # no leak via a mix


def test_it_lets_a_viewer_read(as_viewer: Client, project: Project, owner: User) -> None:
    a, b = _pair(project, owner)
    assert as_viewer.get(f"/p/{project.slug}/evals/compare?a={a.pk}&b={b.pk}").status_code == 200


def test_it_lets_a_member_of_both_projects_see_why_they_differ(
    as_viewer: Client, viewer: User, project: Project, owner: User
) -> None:
    other = create_project(slug="other", name="Other", owner=owner, pack_files=example_files("support_triage"))
    Membership.objects.create(user=viewer, project=other, role=Role.VIEWER)
    page = as_viewer.get(
        f"/p/{project.slug}/evals/compare?a={make_eval(project, owner).pk}&b={make_eval(other, owner).pk}"
    )
    assert page.status_code == 400
