"""A project's eval history: /evals/history/<slug>."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import Membership
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.eval_results import add_run, make_eval


def test_it_plots_pass_rate_and_cost_over_versions(as_owner: Client, project: Project, owner: User) -> None:
    repo = PackRepo(project.repo_path)
    first = project.head
    second = repo.save(
        {"pack/README.md": b"v2"}, base=first, author="olive", email="o@example.com", message="Second version"
    )
    second = repo.head()
    old = make_eval(project, owner, version=first, ago_s=60)
    add_run(old, "a")
    add_run(old, "b", status="failed")
    new = make_eval(project, owner, version=second)
    add_run(new, "a", cost=0.002)
    add_run(new, "b", cost=0.004)
    page = as_owner.get(f"/p/{project.slug}/evals/history")
    assert page.status_code == 200
    text = page.content.decode()
    assert text.count("<polyline") == 2  # one line in each plot
    assert f'href="/p/{new.project.slug}/evals/{new.pk}/summary"' in text
    assert "Second version" in text
    assert text.index(second[:7]) > text.index(first[:7])  # oldest version first on the x axis


def test_it_escapes_model_names(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner, model="openai:http://x#<script>alert(1)</script>")
    add_run(ev, "a")
    page = as_owner.get(f"/p/{project.slug}/evals/history")
    assert b"<script>alert" not in page.content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in page.content


def test_it_requires_login(project: Project) -> None:
    assert Client().get(f"/p/{project.slug}/evals/history").status_code == 302


def test_it_hides_the_project_from_strangers(as_stranger: Client, project: Project) -> None:
    assert as_stranger.get(f"/p/{project.slug}/evals/history").status_code == 404
    assert as_stranger.get("/evals/history/no-such-project").status_code == 404


def test_it_lets_a_viewer_read(as_viewer: Client, project: Project, viewer: User) -> None:
    assert Membership.objects.filter(user=viewer, project=project).exists()
    assert as_viewer.get(f"/p/{project.slug}/evals/history").status_code == 200
