"""Issue 11 end to end, in a real browser against a real studio and Celery worker: make a
project from an example, write its spec (an edit on the Spec tab, saved as a commit),
compile it with the model-free planner and watch the progress reach done, open the
attempt (its plan drawn as a graph, the diff against the pack), adopt it: a proposal
(docs/proposals.md) whose checks evaluate the adopted version on its own model beside the
base, and see them finish with every gold case passing on both sides."""

from __future__ import annotations

import re
from typing import Any

from tests.support.started import Studio

SLUG = "e2e-compile"


def test_a_person_compiles_a_spec_and_proposes_the_pack_with_its_checks(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", SLUG)
    page.select_option("select[name=example]", "support_triage")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{SLUG}/")

    # write the spec: say the task in our own words, and save it as a commit
    page.click("nav.tabs a:has-text('Spec')")
    editor = page.locator("textarea#content")
    editor.wait_for()
    text = editor.input_value()
    assert "task:" in text
    editor.fill(text.replace("Triage one customer-support ticket", "Triage exactly one customer-support ticket", 1))
    page.locator("#problems .valid").first.wait_for()
    page.fill("input[name=message]", "Say the task in our words")
    page.click("#save-form button[type=submit]:has-text('Save')")
    page.get_by_text("Say the task in our words").first.wait_for()

    # compile it with the model-free planner
    page.click("nav.tabs a:has-text('Compile')")
    page.locator("#compile-start").wait_for()
    assert "rules: the model-free planner" in page.locator("select[name=planner]").inner_text()
    page.fill("input[name=attempts]", "3")
    page.click("#compile-start-button")
    page.wait_for_url(re.compile(rf".*/p/{SLUG}/compiles/\d+/$"))
    page.locator("#compile-status", has_text="done").wait_for(timeout=120_000)  # the poller stops once it ends
    assert page.locator("#live-stage").inner_text() == "done"
    assert page.locator("#compile-full-marks").count() == 1, page.locator("#compile-progress").inner_text()
    assert page.locator("#live-offline").inner_text() == "1.000"

    # open the attempt: its plan as a graph, its eval, its diff against the pack; adopt it
    page.locator("#compile-attempts a", has_text="attempt").first.click()
    page.wait_for_url(re.compile(r".*/attempts/\d+/$"))
    assert page.locator("#attempt-graph svg.graph").count() == 1
    assert "gold cases pass" in page.locator("#eval-offline").inner_text()
    assert page.locator("#attempt-diff .diff-file").count() >= 1
    page.click("#adopt-button")
    page.wait_for_url(f"{studio.url}/p/{SLUG}/proposals/1")
    assert "Opened proposal #1" in page.locator("body").inner_text()
    assert page.locator("#proposal-status").inner_text() == "open"
    assert "Adopt compile #" in page.locator("#proposal-title").inner_text()

    # its checks: an eval of the base and one of the adopted version (on the pack's own
    # model, the compiler's offline test model), paired case by case
    page.locator("#checks[data-state=done]").wait_for(timeout=180_000)  # the page polls until both end
    assert page.locator("#n-broken").inner_text() == "0"
    summary = page.locator("#checks-summary").inner_text()
    assert "15 / 15" in summary, summary
