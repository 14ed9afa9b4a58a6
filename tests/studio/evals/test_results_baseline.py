"""The baseline: marking an eval (POST /evals/<id>/baseline) and the regressions panel
on later evals' summary pages."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval
from studio.projects.models import Project
from tests.support.eval_results import add_run, make_eval


def _eval(project: Project, owner: User, passed: int, failed: int, ago_s: float = 0) -> Eval:
    ev = make_eval(project, owner, ago_s=ago_s)
    for i in range(passed + failed):
        add_run(ev, f"case-{i:02d}", status="passed" if i < passed else "failed")
    return ev


def test_it_marks_an_eval_as_the_baseline(as_owner: Client, project: Project, owner: User) -> None:
    old, new = _eval(project, owner, 9, 1, ago_s=60), _eval(project, owner, 9, 1, ago_s=30)
    Eval.objects.filter(pk=old.pk).update(is_baseline=True)
    response = as_owner.post(f"/p/{new.project.slug}/evals/{new.pk}/baseline")
    assert response.status_code == 302
    assert list(Eval.objects.filter(is_baseline=True)) == [new]  # one baseline per project


def test_it_shows_regressions_against_the_baseline(as_owner: Client, project: Project, owner: User) -> None:
    base = _eval(project, owner, 9, 1, ago_s=60)
    Eval.objects.filter(pk=base.pk).update(is_baseline=True)
    worse = _eval(project, owner, 6, 4)
    text = as_owner.get(f"/p/{worse.project.slug}/evals/{worse.pk}/summary").content.decode()
    assert "Against the baseline" in text and '<span class="error">regression</span>' in text
    row = text[text.index('<tr class="regressed">') :]
    assert "pass_rate" in row[: row.index("</tr>")]
    as_good = _eval(project, owner, 9, 1)
    assert "no regression" in as_owner.get(f"/p/{as_good.project.slug}/evals/{as_good.pk}/summary").content.decode()


def test_it_answers_htmx_with_the_baseline_panel(as_owner: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner, 1, 0)
    response = as_owner.post(
        f"/p/{ev.project.slug}/evals/{ev.pk}/baseline", headers={"HX-Request": "true", "HX-Target": "baseline-panel"}
    )
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<section id="baseline-panel"')
    assert b"Clear baseline" in response.content


def test_it_clears_the_baseline(as_owner: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner, 1, 0)
    Eval.objects.filter(pk=ev.pk).update(is_baseline=True)
    as_owner.post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline", {"action": "clear"})
    assert not Eval.objects.filter(is_baseline=True).exists()


def test_it_refuses_an_unfinished_eval(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner, status="running")
    response = as_owner.post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline")
    assert response.status_code == 400
    assert b"only a finished eval can be the baseline" in response.content
    assert not Eval.objects.filter(is_baseline=True).exists()


def test_it_lets_only_authors_choose(as_viewer: Client, as_reviewer: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner, 1, 0)
    assert as_viewer.post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline").status_code == 403
    assert as_reviewer.post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline").status_code == 403
    assert not Eval.objects.filter(is_baseline=True).exists()


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner, 1, 0)
    assert as_stranger.post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline").status_code == 404


def test_it_requires_login_and_post(as_owner: Client, project: Project, owner: User) -> None:
    ev = _eval(project, owner, 1, 0)
    assert Client().post(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline").status_code == 302
    assert as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/baseline").status_code == 405
