"""The eval result routes: everything a result page shows, in the API (studio/evals/results_api.py).
Per route: it works; a login is needed (401); a stranger gets 404; a viewer reads (and
adding a case is for authors: 403); a deployment-scoped token is refused (403); bad
input gets 400 with a message."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.deployments.models import Deployment
from studio.evals.models import Eval
from studio.evals.results.cases import EXPORT_COLUMNS, csv_text
from studio.evals.views.common import dur, usd
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.runs.models import TryRun
from tests.support.eval_results import REJECTED, add_run, make_eval, sample_eval
from tests.support.studio import bearer, send

pytestmark = pytest.mark.django_db


@pytest.fixture
def ev(project: Project, owner: User) -> Eval:
    return sample_eval(project, owner)


def scoped(user: User, project: Project) -> Client:
    deployment = Deployment.objects.create(project=project, name="triage-prod", version="v", created_by=user)
    _, token = ApiToken.issue(user, "runs only", deployment=deployment)
    return Client(headers={"Authorization": f"Bearer {token}"})


def read_routes(ev: Eval) -> list[str]:
    return [
        f"/api/evals/{ev.pk}/blame",
        f"/api/evals/{ev.pk}/coverage",
        f"/api/evals/{ev.pk}/tiers",
        f"/api/evals/{ev.pk}/tags",
        f"/api/evals/{ev.pk}/cases",
        f"/api/evals/{ev.pk}/export?format=jsonl",
        f"/api/evals/{ev.pk}/cases/bad-1/0",
    ]


# -- who may read -----------------------------------------------------------------------------


def test_it_lets_every_member_read_every_result_route(ev: Eval, owner: User, viewer: User, reviewer: User) -> None:
    for user in (owner, viewer, reviewer):
        client = bearer(user)
        for url in read_routes(ev):
            assert client.get(url).status_code == 200, (user.username, url)


def test_it_needs_a_login_for_every_result_route(ev: Eval) -> None:
    for url in read_routes(ev):
        assert Client().get(url).status_code == 401, url


def test_it_hides_every_result_route_from_a_stranger(ev: Eval, stranger: User) -> None:
    client = bearer(stranger)
    for url in read_routes(ev):
        assert client.get(url).status_code == 404, url


def test_it_refuses_a_deployment_scoped_token(ev: Eval, owner: User, project: Project) -> None:
    client = scoped(owner, project)
    for url in [*read_routes(ev), f"/api/evals/compare?a={ev.pk}&b={ev.pk}", f"/api/evals/matrix?evals={ev.pk}"]:
        assert client.get(url).status_code == 403, url
    body = {"project": "triage", "input": {}, "expected": {}}
    assert send(client, "post", "/api/evals/evalset-cases", body).status_code == 403


# -- blame, coverage, tiers, tags -----------------------------------------------------------------


def test_it_answers_which_node_failed(ev: Eval, viewer: User) -> None:
    body = bearer(viewer).get(f"/api/evals/{ev.pk}/blame").json()
    classify = next(n for n in body["nodes"] if n["node"] == "classify")
    assert body["failures"] >= 1 and classify["failures"] >= 1
    assert "schema" in {r["category"] for r in classify["reasons"]} and classify["attempts"] > 0


def test_it_lists_taken_untaken_and_unreached(ev: Eval, viewer: User) -> None:
    body = bearer(viewer).get(f"/api/evals/{ev.pk}/coverage").json()
    assert body["total"] == len(body["edges"]) and body["taken"] == sum(1 for e in body["edges"] if e["cases"])
    assert {e["index"] for e in body["untaken"]} == {e["index"] for e in body["edges"] if not e["cases"]}
    assert body["unreached"][0]["case_id"] == "bad-1" and body["unreached_count"] == 1


def test_it_names_the_no_answer_tier_unanswered(project: Project, owner: User, viewer: User) -> None:
    ev = make_eval(project, owner)
    add_run(ev, "a", tier="auto")
    add_run(ev, "b", status="failed", tier="failed")
    body = bearer(viewer).get(f"/api/evals/{ev.pk}/tiers").json()
    assert [t["tier"] for t in body["tiers"]] == ["auto", "escalated", "unanswered"]
    assert [t["count"] for t in body["tiers"]] == [1, 0, 1]
    cases = bearer(viewer).get(f"/api/evals/{ev.pk}/cases?tier=unanswered").json()
    assert [c["case_id"] for c in cases["cases"]] == ["b"] and cases["cases"][0]["tier"] == "unanswered"


def test_it_breaks_the_pass_rate_down_by_tag(ev: Eval, viewer: User) -> None:
    rows = {r["tag"]: r for r in bearer(viewer).get(f"/api/evals/{ev.pk}/tags").json()}
    assert rows and all(0 <= (r["pass_rate"] or 0) <= 1 for r in rows.values())
    assert sum(r["cases"] for t, r in rows.items() if t == "(untagged)") <= 16


# -- the per-case table, filters, export -----------------------------------------------------------


def test_it_pages_the_per_case_table_with_input_expected_and_output(ev: Eval, viewer: User) -> None:
    client = bearer(viewer)
    first = client.get(f"/api/evals/{ev.pk}/cases?per_page=10").json()
    second = client.get(f"/api/evals/{ev.pk}/cases?per_page=10&page=2").json()
    assert first["count"] == 16 and first["pages"] == 2 and len(first["cases"]) == 10 and len(second["cases"]) == 6
    bad = first["cases"][0]  # bad-1 is not in the evalset: no input, no expected
    assert bad["case_id"] == "bad-1" and bad["input"] is None and bad["status"] == "failed"
    row = first["cases"][1]
    assert row["input"] and row["expected"] is not None and row["status"] in ("passed", "failed")
    passed = next(c for c in first["cases"] + second["cases"] if c["status"] == "passed")
    assert passed["output"] is not None and passed["end_node"]


def test_it_filters_by_status_blamed_end_node_tag_and_text(ev: Eval, viewer: User, project: Project) -> None:
    client = bearer(viewer)

    def ids(query: str) -> list[str]:
        body = client.get(f"/api/evals/{ev.pk}/cases?{query}").json()
        return [c["case_id"] for c in body["cases"]]

    assert ids("status=failed&blamed=classify") == ["bad-1"]
    assert ids("end=general") and all(
        c["end_node"] == "general" for c in client.get(f"/api/evals/{ev.pk}/cases?end=general").json()["cases"]
    )
    tagged = ids("tag=ladder")
    assert tagged and len(tagged) < 16
    untagged = ids("tag=%28untagged%29")  # the tag table's "(untagged)" row links here
    assert untagged and not set(untagged) & set(tagged) and len(untagged) < 16
    some = client.get(f"/api/evals/{ev.pk}/cases?per_page=2").json()["cases"][1]
    word = next(v for v in some["input"].values() if isinstance(v, str)).split()[0]
    assert some["case_id"] in ids(f"q={word.upper()}")


def test_it_refuses_an_unknown_status_or_tier(ev: Eval, viewer: User) -> None:
    got = bearer(viewer).get(f"/api/evals/{ev.pk}/cases?tier=failed")
    assert got.status_code == 400 and "unanswered" in got.json()["detail"]
    assert bearer(viewer).get(f"/api/evals/{ev.pk}/cases?status=great").status_code == 400


def test_it_exports_the_filtered_cases_as_csv_and_jsonl(ev: Eval, viewer: User) -> None:
    client = bearer(viewer)
    got = client.get(f"/api/evals/{ev.pk}/export?format=csv")
    assert got.status_code == 200 and got["Content-Type"].startswith("text/csv")
    assert f"eval-{ev.pk}-cases.csv" in got["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(got.streaming_content).decode())))
    assert len(rows) == 16 and rows[0]["case_id"] == "bad-1" and json.loads(rows[1]["input"])
    lines = b"".join(client.get(f"/api/evals/{ev.pk}/export?format=jsonl&status=failed").streaming_content)
    docs = [json.loads(line) for line in lines.decode().splitlines()]
    assert [d["case_id"] for d in docs] == [d["case_id"] for d in docs if d["status"] == "failed"] and docs
    assert client.get(f"/api/evals/{ev.pk}/export?format=xml").status_code == 400


def test_it_writes_a_text_that_starts_like_a_formula_as_text_in_csv() -> None:
    row: dict[str, Any] = dict.fromkeys(EXPORT_COLUMNS, "plain")
    row.update(case_id="=HYPERLINK(1)", status="@SUM(A1)", repeat=-1, tier="-2+3")
    got = next(csv.DictReader(io.StringIO("".join(csv_text([row])))))
    assert (got["case_id"], got["status"], got["tier"]) == ("'=HYPERLINK(1)", "'@SUM(A1)", "'-2+3")
    assert got["repeat"] == "-1" and got["output"] == "plain"  # numbers and plain text as they are


def test_it_writes_a_summed_cost_without_its_binary_noise_in_csv() -> None:
    row: dict[str, Any] = dict.fromkeys(EXPORT_COLUMNS, "plain")
    noisy = 0.000045 + 0.000045 + 0.000045 + 0.000045 + 0.000045  # five calls' cost, summed
    assert repr(noisy) == "0.00022500000000000002"
    row.update(cost_usd=noisy, latency_s=1.5)
    got = next(csv.DictReader(io.StringIO("".join(csv_text([row])))))
    assert (got["cost_usd"], got["latency_s"]) == ("0.000225", "1.5")


def test_it_writes_cost_and_latency_in_csv_to_the_places_the_page_shows() -> None:
    """The case table shows $0.000135 and 123.5 ms: the CSV holds 0.000135 and 0.1235."""
    row: dict[str, Any] = dict.fromkeys(EXPORT_COLUMNS, "plain")
    row.update(cost_usd=0.00013498765, latency_s=0.12345678, repeat=0)
    got = next(csv.DictReader(io.StringIO("".join(csv_text([row])))))
    assert (got["cost_usd"], got["latency_s"], got["repeat"]) == ("0.000135", "0.1235", "0")
    assert (usd(0.00013498765), dur(0.12345678)) == ("$0.000135", "123.5 ms")  # the page's words for them


# -- one case's trace ---------------------------------------------------------------------------------


def test_it_shows_rejected_text_to_authors_only(ev: Eval, owner: User, viewer: User) -> None:
    mine = bearer(owner).get(f"/api/evals/{ev.pk}/cases/bad-1/0").json()
    theirs = bearer(viewer).get(f"/api/evals/{ev.pk}/cases/bad-1/0").json()
    assert REJECTED in json.dumps(mine["trace"]) and mine["rejected_text_shown"] is True
    assert REJECTED not in json.dumps(theirs) and theirs["rejected_text_shown"] is False
    rejected = next(a for a in theirs["trace"]["attempts"] if not a["ok"])
    assert rejected["hidden"] is True and rejected["reason"]
    assert theirs["diffs"][0]["field"] == "category" and theirs["blamed"] == "classify"


def test_it_answers_404_for_a_case_the_eval_did_not_run(ev: Eval, viewer: User) -> None:
    assert bearer(viewer).get(f"/api/evals/{ev.pk}/cases/nope/0").status_code == 404


# -- compare and matrix ------------------------------------------------------------------------------


def test_it_compares_two_evals_case_by_case(project: Project, owner: User, viewer: User) -> None:
    a, b = make_eval(project, owner, ago_s=60), make_eval(project, owner)
    add_run(a, "x", status="failed")
    add_run(b, "x", status="passed")
    add_run(a, "y")
    add_run(b, "y")
    body = bearer(viewer).get(f"/api/evals/compare?a={a.pk}&b={b.pk}").json()
    assert body["fixed"] == 1 and body["broken"] == 0 and body["complete"] is True
    first = body["cases"][0]
    assert first["case_id"] == "x" and first["changed"] and first["a"]["status"] == "failed"
    assert first["b"]["status"] == "passed" and "expected" in first
    only = bearer(viewer).get(f"/api/evals/compare?a={a.pk}&b={b.pk}&changed=true").json()
    assert [c["case_id"] for c in only["cases"]] == ["x"]


def test_it_refuses_to_compare_an_eval_with_itself(ev: Eval, viewer: User) -> None:
    got = bearer(viewer).get(f"/api/evals/compare?a={ev.pk}&b={ev.pk}")
    assert got.status_code == 400 and "same eval" in got.json()["detail"]


def test_it_lays_several_evals_out_as_a_matrix(project: Project, owner: User, viewer: User) -> None:
    evals = [make_eval(project, owner, ago_s=60 - i) for i in range(3)]
    for i, ev in enumerate(evals):
        add_run(ev, "x", status="passed" if i else "failed")
        add_run(ev, "y")
    body = bearer(viewer).get(f"/api/evals/matrix?evals={','.join(str(e.pk) for e in evals)}").json()
    assert [c["eval"] for c in body["evals"]] == [e.pk for e in evals]
    assert [c["pass_rate"] for c in body["evals"]] == [0.5, 1.0, 1.0]
    assert body["differ"] == 1 and [r["case_id"] for r in body["rows"]] == ["x", "y"]
    assert [c["status"] for c in body["rows"][0]["cells"]] == ["failed", "passed", "passed"]


def test_it_refuses_a_matrix_of_one_eval_or_a_strangers_eval(
    ev: Eval, viewer: User, stranger: User, owner: User
) -> None:
    assert bearer(viewer).get(f"/api/evals/matrix?evals={ev.pk}").status_code == 400
    assert bearer(viewer).get("/api/evals/matrix?evals=1,x").status_code == 400
    other = make_eval(ev.project, owner)
    assert bearer(stranger).get(f"/api/evals/matrix?evals={ev.pk},{other.pk}").status_code == 404


def test_it_lists_every_project_s_evals_without_a_project(ev: Eval, viewer: User, stranger: User) -> None:
    assert [e["id"] for e in bearer(viewer).get("/api/evals").json()] == [ev.pk]
    assert bearer(stranger).get("/api/evals").json() == []


def test_it_says_how_many_cases_a_cancelled_eval_ran(project: Project, owner: User, viewer: User) -> None:
    ev = make_eval(project, owner, status="cancelled")
    add_run(ev, "a")
    add_run(ev, "b", status="cancelled")
    add_run(ev, "c", status="cancelled")
    body = bearer(viewer).get(f"/api/evals/{ev.pk}").json()
    assert body["complete"] is False and body["ran"] == 1 and body["counts"]["cancelled"] == 2
    assert bearer(viewer).get(f"/api/evals/{ev.pk}/gate").status_code == 409


# -- add to evalset ---------------------------------------------------------------------------------


def evalset_text(project: Project) -> str:
    repo = PackRepo(project.repo_path)
    return repo.files(repo.head(), prefix="pack/")["evalset.jsonl"].decode()


def test_it_adds_a_corrected_case_to_the_evalset_as_a_commit(ev: Eval, owner: User, project: Project) -> None:
    before = PackRepo(project.repo_path).head()
    body = {
        "project": "triage",
        "input": {"ticket": "I was charged twice"},
        "expected": {"category": "billing"},
        "from_eval": ev.pk,
        "from_case": "bad-1",
    }
    got = send(bearer(owner), "post", "/api/evals/evalset-cases", body)
    assert got.status_code == 201, got.content
    assert got.json()["case_id"] == "bad-1-fix" and got.json()["commit"] != before
    last = json.loads(evalset_text(project).splitlines()[-1])
    assert last["input"] == {"ticket": "I was charged twice"} and last["expected"] == {"category": "billing"}
    assert f"eval {ev.pk}" in last["note"]
    again = send(bearer(owner), "post", "/api/evals/evalset-cases", {**body, "id": "bad-1-fix"})
    assert again.status_code == 409


def test_it_adds_a_try_it_run_to_the_evalset(owner: User, project: Project) -> None:
    run = TryRun.objects.create(
        project=project, version="v", input={"ticket": "where is my parcel"}, output={}, created_by=owner
    )
    body = {"project": "triage", "input": run.input, "expected": {"category": "other"}, "from_run": run.pk}
    got = send(bearer(owner), "post", "/api/evals/evalset-cases", body)
    assert got.status_code == 201 and got.json()["case_id"] == f"try-{run.pk}"


def test_it_lets_only_authors_add_to_the_evalset(ev: Eval, viewer: User, reviewer: User, stranger: User) -> None:
    body: dict[str, Any] = {"project": "triage", "input": {"ticket": "x"}, "expected": {}}
    assert send(bearer(viewer), "post", "/api/evals/evalset-cases", body).status_code == 403
    assert send(bearer(reviewer), "post", "/api/evals/evalset-cases", body).status_code == 403
    assert send(bearer(stranger), "post", "/api/evals/evalset-cases", body).status_code == 404
    assert send(Client(), "post", "/api/evals/evalset-cases", body).status_code == 401


def test_it_refuses_a_case_that_would_not_load(owner: User, project: Project) -> None:
    body = {"project": "triage", "input": {"ticket": "x"}, "expected": {"category": "x"}, "id": "bad id!"}
    got = send(bearer(owner), "post", "/api/evals/evalset-cases", body)
    assert got.status_code == 400 and "case id" in got.json()["detail"]


def test_it_lists_recent_runs_across_projects(owner: User, viewer: User, stranger: User, project: Project) -> None:
    run = TryRun.objects.create(project=project, version="v", input={"ticket": "hi"}, created_by=owner)
    assert [r["id"] for r in bearer(viewer).get("/api/runs").json()] == [run.pk]
    assert [r["id"] for r in bearer(viewer).get("/api/runs?project=triage").json()] == [run.pk]
    assert bearer(stranger).get("/api/runs").json() == []
    assert bearer(stranger).get("/api/runs?project=triage").status_code == 404
    assert Client().get("/api/runs").status_code == 401
    assert scoped(owner, project).get("/api/runs").status_code == 403
