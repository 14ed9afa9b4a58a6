"""The per-case pages: the filtered case table and its export, a case's input and expected
beside its trace, links to the drill-down from every table that lists cases, two evals
side by side per case, the matrix, add to evalset, cancelled evals, and the lists across
projects (all evals, all recent runs)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.evals.models import Eval
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.runs.models import TryRun
from tests.support.eval_results import add_run, make_eval, sample_eval

pytestmark = pytest.mark.django_db


@pytest.fixture
def ev(project: Project, owner: User) -> Eval:
    return sample_eval(project, owner)


def url(ev: Eval, rest: str) -> str:
    return f"/p/{ev.project.slug}/evals/{ev.pk}/{rest}"


# -- the case table -----------------------------------------------------------------------------


def test_it_lists_every_run_with_input_expected_output_and_a_link(as_viewer: Client, ev: Eval) -> None:
    page = as_viewer.get(url(ev, "cases"))
    assert page.status_code == 200
    text = page.content.decode()
    assert text.count("<tr data-case=") == 16
    assert f'href="/p/triage/evals/{ev.pk}/cases/bad-1/0"' in text
    assert "format=csv" in text and "format=jsonl" in text


def test_it_filters_the_case_table(as_viewer: Client, ev: Eval) -> None:
    text = as_viewer.get(url(ev, "cases?status=failed&blamed=classify")).content.decode()
    assert text.count("<tr data-case=") == 1 and 'data-case="bad-1"' in text
    assert 'href="/p/triage/evals/' in text and "clear</a>" in text


def test_it_says_what_is_wrong_with_a_filter(as_viewer: Client, ev: Eval) -> None:
    page = as_viewer.get(url(ev, "cases?tier=failed"))
    assert page.status_code == 400 and "unanswered" in page.content.decode()


def test_it_answers_the_pager_with_the_table_fragment(as_viewer: Client, ev: Eval) -> None:
    page = as_viewer.get(url(ev, "cases"), headers={"HX-Request": "true", "HX-Target": "case-table"})
    assert page.content.decode().lstrip().startswith('<div id="case-table"')


def test_it_guards_the_case_table(ev: Eval, as_stranger: Client) -> None:
    assert Client().get(url(ev, "cases")).status_code == 302
    assert as_stranger.get(url(ev, "cases")).status_code == 404
    assert as_stranger.get(url(ev, "export?format=csv")).status_code == 404


def test_it_downloads_the_filtered_runs(as_viewer: Client, ev: Eval) -> None:
    got = as_viewer.get(url(ev, "export?format=jsonl&status=failed"))
    assert got.status_code == 200 and "attachment" in got["Content-Disposition"]
    docs = [json.loads(line) for line in b"".join(got.streaming_content).decode().splitlines()]
    assert docs and {d["status"] for d in docs} == {"failed"}
    assert as_viewer.get(url(ev, "export?format=pdf")).status_code == 400


# -- the drill-down -----------------------------------------------------------------------------


def test_it_shows_input_and_expected_beside_the_trace(as_viewer: Client, ev: Eval) -> None:
    case_id = ev.cases.exclude(case_id="bad-1").order_by("case_id").first().case_id  # type: ignore[union-attr]
    text = as_viewer.get(url(ev, f"cases/{case_id}/0")).content.decode()
    assert 'id="case-input"' in text and 'id="case-expected"' in text and 'id="case-output"' in text
    assert "Add to evalset" not in text  # a viewer does not change the evalset


def test_it_shows_the_error_once(as_owner: Client, project: Project, owner: User) -> None:
    ev = make_eval(project, owner)
    row = add_run(ev, "x", status="error", tier="", trace={"status": "failed", "error": "worker died", "steps": []})
    row.error = "worker died"
    row.save()
    text = as_owner.get(url(ev, "cases/x/0")).content.decode()
    assert text.count("worker died") == 1


def test_it_offers_authors_to_add_the_case_to_the_evalset(as_owner: Client, ev: Eval) -> None:
    case_id = ev.cases.exclude(case_id="bad-1").order_by("case_id").first().case_id  # type: ignore[union-attr]
    assert 'id="add-to-evalset"' in as_owner.get(url(ev, f"cases/{case_id}/0")).content.decode()


# -- links to the drill-down ---------------------------------------------------------------------------


def test_it_links_cases_from_the_summary_and_breaks_pass_rate_down_by_tag(as_viewer: Client, ev: Eval) -> None:
    text = as_viewer.get(url(ev, "summary")).content.decode()
    assert f'href="/p/triage/evals/{ev.pk}/cases/bad-1/0"' in text
    assert 'id="tag-pass-rates"' in text and f"/p/triage/evals/{ev.pk}/cases?tag=" in text


def test_it_links_blamed_cases_from_the_blame_table(as_viewer: Client, ev: Eval) -> None:
    text = as_viewer.get(url(ev, "blame")).content.decode()
    row = text[text.index('<tr data-node="classify">') :]
    assert f'href="/p/triage/evals/{ev.pk}/cases/bad-1/0"' in row[: row.index("</tr>")]


def test_it_compares_two_evals_side_by_side_per_case(as_viewer: Client, project: Project, owner: User) -> None:
    a, b = make_eval(project, owner, ago_s=60), make_eval(project, owner)
    add_run(a, "x", status="failed")
    add_run(b, "x")
    add_run(a, "y")
    add_run(b, "y")
    text = as_viewer.get(f"/p/triage/evals/compare?a={a.pk}&b={b.pk}").content.decode()
    table = text[text.index('id="case-pairs"') :]
    assert table.index('data-case="x"') < table.index('data-case="y"')  # changed first
    assert f"/p/triage/evals/{a.pk}/cases/x/0" in table and f"/p/triage/evals/{b.pk}/cases/x/0" in table


def test_it_lays_several_evals_side_by_side(as_viewer: Client, project: Project, owner: User) -> None:
    evals = [make_eval(project, owner, ago_s=60 - i) for i in range(3)]
    for i, e in enumerate(evals):
        add_run(e, "x", status="passed" if i else "failed")
    page = as_viewer.get(f"/p/triage/evals/matrix?evals={','.join(str(e.pk) for e in evals)}")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="matrix"' in text and text.count("<th><a href=") == 3 and 'class="differs"' in text


def test_it_asks_for_evals_to_lay_side_by_side(as_viewer: Client, ev: Eval, as_stranger: Client) -> None:
    page = as_viewer.get(f"/p/triage/evals/matrix?evals={ev.pk}")
    assert page.status_code == 200 and 'id="matrix-picker"' in page.content.decode()
    assert as_stranger.get(f"/p/triage/evals/matrix?evals={ev.pk}").status_code == 404


# -- add to evalset ------------------------------------------------------------------------------


def last_case(project: Project) -> dict[str, object]:
    repo = PackRepo(project.repo_path)
    return json.loads(repo.files(repo.head(), prefix="pack/")["evalset.jsonl"].decode().splitlines()[-1])  # type: ignore[no-any-return]


def test_it_adds_a_case_from_the_drill_down(as_owner: Client, ev: Eval, project: Project) -> None:
    case_id = ev.cases.exclude(case_id="bad-1").order_by("case_id").first().case_id  # type: ignore[union-attr]
    got = as_owner.post(
        "/p/triage/evals/add-case",
        {"eval": ev.pk, "case_id": case_id, "repeat": 0, "expected": '{"category": "billing"}'},
    )
    assert got.status_code == 302 and got["Location"] == "/p/triage/evalset/"
    added = last_case(project)
    assert added["id"] == f"{case_id}-fix" and added["expected"] == {"category": "billing"} and added["input"]


def test_it_adds_a_case_from_a_try_it_run(as_owner: Client, owner: User, project: Project) -> None:
    run = TryRun.objects.create(
        project=project, version="v", input={"ticket": "hi"}, output={}, status="done", created_by=owner
    )
    got = as_owner.post("/p/triage/evals/add-case", {"run": run.pk, "expected": '{"category": "other"}'})
    assert got.status_code == 302
    assert last_case(project)["input"] == {"ticket": "hi"} and last_case(project)["id"] == f"try-{run.pk}"
    assert 'id="add-to-evalset"' in as_owner.get(f"/p/triage/runs/{run.pk}").content.decode()


def test_it_refuses_bad_json_without_committing(as_owner: Client, owner: User, project: Project) -> None:
    run = TryRun.objects.create(project=project, version="v", input={"ticket": "hi"}, status="done", created_by=owner)
    head = PackRepo(project.repo_path).head()
    got = as_owner.post("/p/triage/evals/add-case", {"run": run.pk, "expected": "{nope"}, follow=True)
    assert "not JSON" in got.content.decode() and PackRepo(project.repo_path).head() == head


def test_it_lets_only_authors_add_cases(as_viewer: Client, as_stranger: Client, owner: User, project: Project) -> None:
    run = TryRun.objects.create(project=project, version="v", input={"ticket": "hi"}, status="done", created_by=owner)
    assert as_viewer.post("/p/triage/evals/add-case", {"run": run.pk, "expected": "{}"}).status_code == 403
    assert as_stranger.post("/p/triage/evals/add-case", {"run": run.pk, "expected": "{}"}).status_code == 404


# -- cancelled evals ----------------------------------------------------------------------------


def test_it_says_how_many_cases_a_cancelled_eval_ran_and_does_not_gate_it(
    as_owner: Client, project: Project, owner: User
) -> None:
    base = make_eval(project, owner, ago_s=60)
    add_run(base, "a")
    Eval.objects.filter(pk=base.pk).update(is_baseline=True)
    ev = make_eval(project, owner, status="cancelled")
    add_run(ev, "a")
    add_run(ev, "b", status="cancelled")
    text = as_owner.get(url(ev, "summary")).content.decode()
    assert "1 case run ran, 1 was cancelled" in text
    assert "Against the baseline" not in text
    live = as_owner.get(url(ev, "")).content.decode()
    assert 'id="eval-cancelled-counts"' in live and "1 case run ran" in live


# -- across projects ------------------------------------------------------------------------------


def test_it_lists_every_eval_across_projects_filterable_by_project(
    as_viewer: Client, as_stranger: Client, ev: Eval
) -> None:
    text = as_viewer.get("/evals/").content.decode()
    assert f'href="/p/triage/evals/{ev.pk}/summary"' in text
    assert f'href="/p/triage/evals/{ev.pk}/summary"' not in as_viewer.get("/evals/?project=other").content.decode()
    assert f"/evals/{ev.pk}/" not in as_stranger.get("/evals/").content.decode()
    assert 'href="/evals/"' in text and 'href="/runs/"' in text  # in the nav


def test_it_lists_recent_runs_across_projects(
    as_viewer: Client, as_stranger: Client, owner: User, project: Project
) -> None:
    run = TryRun.objects.create(project=project, version="v", input={"ticket": "hi"}, created_by=owner)
    assert f'href="/p/triage/runs/{run.pk}"' in as_viewer.get("/runs/?project=triage").content.decode()
    assert f"/runs/{run.pk}" not in as_stranger.get("/runs/").content.decode()
    assert Client().get("/runs/").status_code == 302
