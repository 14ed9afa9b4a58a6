"""Issue 13 end to end, in a real browser against a real studio and Celery worker: every
result page of the five example packs (summary, blame, coverage, tiers, cost, cases, a
case, compare, the matrix), each saved as a screenshot (tests/support/screenshots.py);
then a person filters the case table, downloads it, and adds a corrected case to the
evalset from the drill-down and from a try-it run; and the lists across projects."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from tests.support.screenshots import save_screenshot
from tests.support.started import ROOT, Studio

SCRIPT = ROOT / "packs" / "support_triage" / "fakes" / "scripted.json"
PACKS = ("support_triage", "refund_desk", "invoice_extract", "lead_qualifier", "moderation")
TABS = ("summary", "blame", "coverage", "tiers", "cost", "cases")


def start_eval(page: Any, studio: Studio, slug: str) -> str:
    page.goto(f"{studio.url}/p/{slug}/evals/new")
    page.click("#eval-start-button")
    page.wait_for_url(re.compile(r".*/evals/\d+/$"))
    return re.search(r"/evals/(\d+)/", page.url).group(1)  # type: ignore[union-attr]


def wait_until_ended(page: Any, studio: Studio, slug: str, eval_id: str) -> None:
    page.goto(f"{studio.url}/p/{slug}/evals/{eval_id}/")
    page.locator("#eval-results").wait_for(timeout=180_000)  # shown once the poller stops
    assert page.locator("#eval-status").inner_text() == "done"


def visit(page: Any, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, url


def test_every_results_page_of_the_five_example_packs_is_shown_and_kept(page: Any, studio: Studio) -> None:
    for slug in PACKS:
        before, after = start_eval(page, studio, slug), start_eval(page, studio, slug)
        for eval_id in (before, after):
            wait_until_ended(page, studio, slug, eval_id)
        base = f"{studio.url}/p/{slug}/evals/{after}"
        for tab in TABS:
            visit(page, f"{base}/{tab}")
            assert page.locator(".tabs a.active").count() == 1
            save_screenshot(page, f"{slug}-{tab}")
        assert page.locator("#cases tr[data-case]").count() >= 1
        page.locator("#cases tr[data-case] a").first.click()
        page.wait_for_url(re.compile(r".*/cases/.+/\d+$"))
        assert page.locator("#case-input").is_visible() and page.locator("#case-expected").is_visible()
        save_screenshot(page, f"{slug}-case")
        visit(page, f"{studio.url}/p/{slug}/evals/compare?a={before}&b={after}")
        assert page.locator("#case-pairs tr[data-case]").count() >= 1
        save_screenshot(page, f"{slug}-compare")
        visit(page, f"{studio.url}/p/{slug}/evals/matrix?evals={before},{after}")
        assert page.locator("#matrix tr[data-case]").count() >= 1
        save_screenshot(page, f"{slug}-matrix")


def test_a_person_filters_cases_downloads_them_and_adds_a_corrected_case(page: Any, studio: Studio) -> None:
    slug = "support_triage"
    eval_id = start_eval(page, studio, slug)
    wait_until_ended(page, studio, slug, eval_id)

    visit(page, f"{studio.url}/p/{slug}/evals/{eval_id}/summary")
    assert page.locator("#tag-pass-rates tr[data-tag]").count() >= 1
    assert "unanswered" in page.locator("#eval-summary").inner_text()

    # a model wrong 60% of the time: failures to blame, outcomes that change
    visit(page, f"{studio.url}/endpoints/new")
    page.fill("input[name=name]", "noisy-results")
    page.fill("input[name=spec]", f"sim:error=0.6,seed=5,invalid=0,base={SCRIPT}")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/endpoints/")
    visit(page, f"{studio.url}/p/{slug}/evals/new")
    page.locator("#eval-start input[type=checkbox]").first.uncheck()
    page.locator("#eval-start label:has-text('noisy-results') input").check()
    page.click("#eval-start-button")
    page.wait_for_url(re.compile(r".*/evals/\d+/$"))
    noisy = re.search(r"/evals/(\d+)/", page.url).group(1)  # type: ignore[union-attr]
    wait_until_ended(page, studio, slug, noisy)
    visit(page, f"{studio.url}/p/{slug}/evals/{noisy}/blame")
    blamed = page.locator("#node-blame .blamed-cases a").first
    save_screenshot(page, f"{slug}-blame-noisy")
    blamed.click()
    page.wait_for_url(re.compile(r".*/cases/.+/\d+$"))
    assert page.locator(".pill.failed").count() >= 1
    visit(page, f"{studio.url}/p/{slug}/evals/compare?a={eval_id}&b={noisy}&changed=1")
    assert page.locator("#case-pairs tr.differs").count() >= 1
    save_screenshot(page, f"{slug}-compare-noisy")
    visit(page, f"{studio.url}/p/{slug}/evals/matrix?evals={eval_id},{noisy}")
    save_screenshot(page, f"{slug}-matrix-noisy")

    visit(page, f"{studio.url}/p/{slug}/evals/{eval_id}/cases")
    everything = page.locator("#cases tr[data-case]").count()
    page.select_option("#case-filters select[name=status]", "passed")
    page.click("#case-filters button[type=submit]")
    page.wait_for_url(re.compile(r".*status=passed.*"))
    passed = page.locator("#cases tr[data-case]").count()
    assert 0 < passed <= everything
    assert page.locator("#cases tr[data-case] .pill.passed").count() == passed
    save_screenshot(page, f"{slug}-cases-filtered")

    with page.expect_download() as got:
        page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"))))
    assert len(rows) == passed and {r["status"] for r in rows} == {"passed"}

    page.locator("#cases tr[data-case] a").first.click()
    page.wait_for_url(re.compile(r".*/cases/.+/\d+$"))
    page.locator("#add-to-evalset summary").click()
    page.fill("#add-to-evalset input[name=new_id]", "from-the-browser")
    page.click("#add-to-evalset-button")
    page.wait_for_url(re.compile(rf".*/p/{slug}/evalset/$"))
    assert "from-the-browser" in page.locator("main").inner_text()

    visit(page, f"{studio.url}/p/{slug}/runs/new")
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(rf".*/p/{slug}/runs/\d+$"))
    page.locator("#add-to-evalset").wait_for(timeout=120_000)  # shown once the run has ended
    page.locator("#add-to-evalset summary").click()
    page.fill("#add-to-evalset input[name=new_id]", "from-a-try-it-run")
    save_screenshot(page, f"{slug}-try-it-add-to-evalset")
    page.click("#add-to-evalset-button")
    page.wait_for_url(re.compile(rf".*/p/{slug}/evalset/$"))
    assert "from-a-try-it-run" in page.locator("main").inner_text()

    visit(page, f"{studio.url}/evals/?project={slug}")
    assert page.locator(f"#all-evals a[href='/p/{slug}/evals/{eval_id}/summary']").count() == 1
    save_screenshot(page, "all-evals")
    page.click("nav a[href='/runs/']")
    page.wait_for_url(f"{studio.url}/runs/")
    assert page.locator("#all-runs").is_visible()
    save_screenshot(page, "all-runs")
