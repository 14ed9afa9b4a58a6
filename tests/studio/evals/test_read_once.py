"""What reads every trace (the per-model-tier table, compare's outcomes) is computed once per state of an
eval's rows: an ended eval's page reads what the backend stored in its summary, a running
eval's page computes it once and reads the cache until a row changes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studio.evals.models import Eval, EvalCase
from studio.evals.results import cases, summary
from studio.evals.shared import summary_of
from studio.projects.models import Project
from tests.support.eval_results import add_run, sample_eval
from tests.support.studio import run_all, start


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of the costly computation (and still makes it)."""
    calls: list[int] = []
    real = summary.compute_tiers_by_model

    def counting(ev: Eval) -> list[dict[str, Any]]:
        calls.append(ev.pk)
        return real(ev)

    monkeypatch.setattr(summary, "compute_tiers_by_model", counting)
    cache.clear()
    return calls


def test_a_running_eval_computes_the_table_once_per_state_of_its_rows(
    project: Project, owner: User, as_owner: Client, computed: list[int]
) -> None:
    ev = sample_eval(project, owner, status="running")
    url = f"/p/triage/evals/{ev.pk}/tiers"
    for _ in range(3):
        assert 'id="tiers-by-model"' in as_owner.get(url).content.decode()
    assert computed == [ev.pk]
    add_run(ev, "late-1", status="passed", tier="auto")
    as_owner.get(url)
    assert computed == [ev.pk, ev.pk]  # a new row: computed again


def test_an_ended_eval_reads_the_stored_table(
    project: Project, owner: User, as_owner: Client, computed: list[int]
) -> None:
    ev = sample_eval(project, owner, status="done")
    stored = summary_of(ev)
    assert stored["tiers_by_model"]
    computed.clear()
    Eval.objects.filter(pk=ev.pk).update(summary=stored)
    page = as_owner.get(f"/p/triage/evals/{ev.pk}/tiers")
    assert page.status_code == 200 and stored["tiers_by_model"][0]["tier"] in page.content.decode()
    assert computed == []  # the page did not read the traces again


def test_compare_reads_each_evals_traces_once_per_state_of_its_rows(
    project: Project, owner: User, as_owner: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    real = cases._read_outcomes

    def counting(ev: Eval, pack: Any) -> Any:
        read.append(ev.pk)
        return real(ev, pack)

    monkeypatch.setattr(cases, "_read_outcomes", counting)
    cache.clear()
    a, b = sample_eval(project, owner), sample_eval(project, owner)
    url = f"/p/triage/evals/compare?a={a.pk}&b={b.pk}"
    for _ in range(3):
        assert as_owner.get(url).status_code == 200
    assert sorted(read) == [a.pk, b.pk]
    EvalCase.objects.filter(eval=b, case_id="bad-1").update(finished_at=timezone.now())  # scored again
    assert as_owner.get(url).status_code == 200
    assert sorted(read) == [a.pk, b.pk, b.pk]  # only the eval whose rows changed is read again
    EvalCase.objects.filter(eval=a, case_id="bad-1").update(status=EvalCase.Status.CANCELLED)  # not scored
    assert as_owner.get(url).status_code == 200
    assert sorted(read) == [a.pk, a.pk, b.pk, b.pk]  # a status change of any row is a new state


def test_a_scored_case_stores_its_answer_so_compare_reads_no_trace(
    project: Project, owner: User, sent: list[int]
) -> None:
    ev = start(project, owner)
    run_all(ev)
    done = EvalCase.objects.filter(eval=ev, run_status="done")
    assert done.exists() and all(isinstance(o, dict) for o in done.values_list("output", flat=True))
    cache.clear()
    with CaptureQueriesContext(connection) as seen:
        got = cases._outcomes(ev, None)
    assert not any('"trace"' in q["sql"] for q in seen.captured_queries)  # no finished row without its answer
    assert {k: v["output"] for k, v in got.items() if v["output"] is not None} == {
        (r.case_id, r.repeat): r.output for r in done
    }
