"""Issue 5 end to end, in a real browser against a real studio and Celery worker: start
an eval of an example pack on two models, watch the progress bar finish, open the blame
and coverage views, drill into a failed case, and compare the two evals."""

from __future__ import annotations

import re
from typing import Any

from tests.support.started import ROOT, Studio

SCRIPT = ROOT / "packs" / "support_triage" / "fakes" / "scripted.json"


def wait_until_ended(page: Any, studio: Studio, eval_id: str) -> None:
    page.goto(f"{studio.url}/p/support_triage/evals/{eval_id}/")
    page.locator("#eval-results").wait_for(timeout=120_000)  # shown once the poller stops
    assert page.locator("#eval-status").inner_text() == "done"
    assert page.locator("#eval-bar").get_attribute("aria-valuenow") == page.locator("#eval-bar").get_attribute(
        "aria-valuemax"
    )


def test_a_person_runs_two_evals_and_reads_why_cases_failed(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/endpoints/new")
    page.fill("input[name=name]", "noisy-sim")
    page.fill("input[name=spec]", f"sim:error=0.6,seed=5,invalid=0,base={SCRIPT}")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/endpoints/")
    assert "noisy-sim" in page.locator("main").inner_text()

    page.goto(f"{studio.url}/p/support_triage/evals/new")
    boxes = page.locator("#eval-start input[type=checkbox]")
    for i in range(boxes.count()):
        boxes.nth(i).check()
    page.click("#eval-start-button")
    page.wait_for_url(re.compile(r".*/evals/\d+/$"))
    first = re.search(r"/evals/(\d+)/", page.url).group(1)  # type: ignore[union-attr]
    page.locator("#eval-progress").wait_for()
    ids = [first] + [
        re.search(r"/evals/(\d+)/", a.get_attribute("href")).group(1)  # type: ignore[union-attr]
        for a in page.locator("#eval-batch a").all()
        if f"/evals/{first}/" not in a.get_attribute("href")
    ]
    assert len(ids) == 2
    for eval_id in ids:
        wait_until_ended(page, studio, eval_id)

    noisy = next(i for i in ids if "sim:" in _model(page, studio, i))
    clean = next(i for i in ids if i != noisy)

    page.goto(f"{studio.url}/p/support_triage/evals/{noisy}/blame")
    blame = page.locator("main").inner_text()
    assert page.locator("svg").count() >= 1 and "Failures blamed per node" in blame
    assert "No failed runs" not in blame  # a model wrong 60% of the time fails some cases

    page.goto(f"{studio.url}/p/support_triage/evals/{noisy}/coverage")
    assert page.locator("svg").count() >= 1 and "classify" in page.locator("main").inner_text()

    page.goto(f"{studio.url}/p/support_triage/evals/{noisy}/cost")
    failed_row = page.locator("tr:has(td:nth-child(2) span.pill.failed)").first  # status column
    failed_row.locator("a[href*='/cases/']").click()
    page.wait_for_url(re.compile(r".*/cases/.+/\d+$"))
    trace = page.locator("main").inner_text()
    assert "classify" in trace and "failed" in trace

    page.goto(f"{studio.url}/p/support_triage/evals/compare?a={clean}&b={noisy}")
    comparison = page.locator("main").inner_text()
    assert "McNemar" in comparison
    assert "broken" in comparison.lower()


def _model(page: Any, studio: Studio, eval_id: str) -> str:
    page.goto(f"{studio.url}/p/support_triage/evals/{eval_id}/")
    return str(page.locator("#eval-model").inner_text())
