"""Host scorers (docs/pack-format.md and docs/compiler.md, "Host scorers") end to end, in a
real browser against a real studio and Celery worker. scripts/start registers the example
registry packs/invoice_extract/scorers.py:SCORERS (PACKFORGE_SCORERS), whose `line_items`
scorer matches an invoice's line items by their text (case and punctuation aside),
quantity and amount, and scores the share matched.

Eval: a person adds a `scorer:line_items` rule to the invoice_extract example's manifest
(a misspelt name is a problem naming the unknown scorer, at its line), edits one gold case
so only one of its two items can match, runs an eval and reads, on that case's page, the
scorer's score and reason for `line_items`.

Compile: a person declares `compare: scorer:line_items` on the example's spec (the spec
editor names a misspelt scorer too), compiles it with the model-free planner, finds the
rule in the attempt's manifest, adopts it, and sees the proposal's checks (which evaluate
the adopted pack with the host's scorer) pass every case on both sides."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import yaml
from playwright.sync_api import expect

from tests.support.screenshots import save_screenshot
from tests.support.started import Studio

EXAMPLE = "invoice_extract"
RULE = '{compare: "scorer:line_items", options: {amount_tolerance: 0.005}, pass: 1}'
UNKNOWN = "unknown scorer 'line_itemz'; the host registers: line_items"
CASE = "inv-01"  # the evalset's first case: paper, box of 5 (4 x $119.96) and gel pens (2 x $17.98)
PENS = "Gel pens, black, pack of 12"
# The pack's scripted model reads inv-01 as printed. The edited gold writes the paper's
# description in other case and punctuation (the scorer matches it, `exact` would not) and
# three packs of pens (no answered item matches): one item of two, and one answered left over.
REASON = f"1 of 2 line items match; not found: '{PENS}'; 1 answered item matches none"
SPEC_RULE = "    compare: scorer:line_items\n    options: {amount_tolerance: 0.005}\n    pass: 1\n"
CHECK_MS = 20_000  # how long live validation may take before the test gives up (expect's default is 5 s)
WAIT_MS = 180_000  # how long an eval, compile or check may take before the test gives up


def new_project(page: Any, studio: Studio, slug: str) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", slug)
    page.select_option("select[name=example]", EXAMPLE)
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{slug}/")


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the one line of `text` that holds `needle`."""
    lines = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(lines) == 1, (needle, lines)
    return lines[0]


def expect_one_problem(page: Any, message: str, line: int) -> None:
    """The editor's live validation shows exactly `message`, pointing at `line`."""
    problems = page.locator("#problems ul.problems li")
    expect(problems).to_have_count(1)
    expect(problems.first).to_contain_text(message)
    expect(problems.first.locator("button.line")).to_have_attribute("data-line", str(line))
    expect(page.locator("#problems .valid")).to_have_count(0)


def save(page: Any, message: str) -> None:
    page.fill("#save-form input[name=message]", message)
    page.click("#save-form button[type=submit]:has-text('Save')")
    page.get_by_text(message).first.wait_for()


def add_the_scorer_rule(page: Any, studio: Studio, slug: str) -> None:
    page.goto(f"{studio.url}/p/{slug}/")
    page.click("nav.tabs a:has-text('Files')")
    page.locator("nav.file-list a", has_text="manifest.yaml").click()
    editor = page.locator("textarea#content")
    editor.wait_for()
    text = editor.input_value()
    assert text.count("\nfields:\n") == 1 and "scorer:" not in text
    misspelt = text.replace("\nfields:\n", f"\nfields:\n  line_items: {RULE.replace('line_items', 'line_itemz')}\n")
    editor.fill(misspelt)
    page.locator("#problems").get_by_text(UNKNOWN).wait_for()
    expect_one_problem(page, f"fields.line_items: {UNKNOWN}", line_of(misspelt, "scorer:line_itemz"))
    save_screenshot(page, "scorer-unknown-name")

    editor.fill(text.replace("\nfields:\n", f"\nfields:\n  line_items: {RULE}\n"))
    expect(page.locator("#problems .valid")).to_have_text(
        ["✓ No problems in manifest.yaml", "✓ The whole pack loads"], timeout=CHECK_MS
    )
    expect(page.locator("#problems")).not_to_contain_text("line_itemz")
    save(page, "Compare line items with the host's scorer")


def edit_the_gold_case(page: Any, studio: Studio, slug: str) -> None:
    page.goto(f"{studio.url}/p/{slug}/evalset/")
    row = page.locator("table#cases tr#case-1")
    expect(row).to_contain_text(CASE)
    row.locator("a:has-text('edit')").click()
    form = page.locator("#case-form")
    expected_box = form.locator("textarea[name=expected]")
    expected_box.wait_for()
    expected = json.loads(expected_box.input_value())
    items = expected["line_items"]
    assert [i["description"] for i in items] == ["A4 copy paper, box of 5 reams", PENS], items
    items[0]["description"] = "A4 Copy Paper - Box of 5 Reams"
    items[1]["quantity"] = 3
    expected_box.fill(json.dumps(expected, indent=2))
    form.locator("input[name=message]").fill("inv-01: three packs of pens")
    form.locator("button[type=submit]:has-text('Save case')").click()
    page.get_by_text("inv-01: three packs of pens").first.wait_for()
    expect(page.locator("table#cases tr#case-1")).to_contain_text("Copy Paper - Box")


def test_an_eval_scores_a_field_with_the_hosts_scorer_and_the_case_shows_its_reason(page: Any, studio: Studio) -> None:
    slug = "e2e-scorer-eval"
    new_project(page, studio, slug)
    add_the_scorer_rule(page, studio, slug)
    edit_the_gold_case(page, studio, slug)

    page.goto(f"{studio.url}/p/{slug}/")
    page.click("#run-eval")
    page.click("#eval-start-button")
    page.wait_for_url(re.compile(rf".*/p/{slug}/evals/\d+/$"))
    page.locator("#eval-results").wait_for(timeout=WAIT_MS)  # shown once the poller stops
    expect(page.locator("#eval-status")).to_have_text("done")
    # every other case is read as its gold says; the edited one fails on line_items only
    expect(page.locator("#count-passed")).to_have_text("13")
    expect(page.locator("#count-failed")).to_have_text("1")
    page.click("#eval-results")
    page.wait_for_url(re.compile(rf".*/p/{slug}/evals/\d+/summary$"))
    field_row = page.locator("#field-table tr", has=page.locator("td.mono", has_text=re.compile("^line_items$")))
    expect(field_row.locator("td").nth(1)).to_contain_text("scorer")
    failing = page.locator("#failing-cases tr:has(td)")
    expect(failing).to_have_count(1)
    expect(failing.first).to_contain_text(CASE)

    failing.first.locator("a", has_text=CASE).click()
    page.wait_for_url(re.compile(rf".*/cases/{CASE}/\d+$"))
    diffs = page.locator("table#diffs tr:has(td)")
    expect(diffs).to_have_count(1)  # vendor, sums and the rest match
    expect(diffs.first.locator("td").first).to_have_text("line_items")
    expect(diffs.first.locator(".scorer-reason")).to_have_text(f"score 0.50: {REASON}")
    expect(diffs.first.locator("td").nth(2)).to_contain_text('"quantity": 2')
    diffs.first.scroll_into_view_if_needed()
    save_screenshot(page, "scorer-case")


def declare_the_scorer_in_the_spec(page: Any, studio: Studio, slug: str) -> None:
    page.goto(f"{studio.url}/p/{slug}/")
    page.click("nav.tabs a:has-text('Spec')")
    editor = page.locator("textarea#content")
    editor.wait_for()
    text = editor.input_value()
    anchor = (
        "  line_items:\n"
        "    description: Each line of the invoice - description, quantity and amount - in the order printed.\n"
        "    type: array\n"
    )
    assert text.count(anchor) == 1 and "scorer:" not in text
    misspelt = text.replace(anchor, anchor + "    compare: scorer:line_itemz\n")
    editor.fill(misspelt)
    page.locator("#problems").get_by_text(UNKNOWN).wait_for()
    expect_one_problem(page, f"outputs.line_items.compare: {UNKNOWN}", line_of(misspelt, "scorer:line_itemz"))

    editor.fill(text.replace(anchor, anchor + SPEC_RULE))
    expect(page.locator("#problems .valid").first).to_be_visible(timeout=CHECK_MS)
    expect(page.locator("#problems")).not_to_contain_text("line_itemz")
    expect(page.locator("#problems ul.problems li")).to_have_count(0)
    save(page, "Compare line items with the host's scorer")


def manifest_rule(page: Any, where: str) -> Any:
    """The `line_items` rule on the new side of the manifest.yaml diff under `where`, as YAML reads it."""
    diff = page.locator(f"{where} section.diff-file", has=page.locator("h3", has_text="manifest.yaml"))
    expect(diff).to_have_count(1)
    new = diff.locator("tr:not(.gap) td.new").all_text_contents()
    old = diff.locator("tr:not(.gap) td.old").all_text_contents()
    assert not any("scorer:" in t for t in old), old  # the project's pack compares no field by a scorer
    at = [n for n, t in enumerate(new) if t.strip() == "compare: scorer:line_items"]
    assert len(at) == 1, new
    rule = textwrap.dedent("\n".join(new[at[0] - 1 : at[0] + 4]))
    assert rule.startswith("line_items:"), rule
    return yaml.safe_load(rule)


def test_a_compiled_spec_carries_its_scorer_rule_into_the_adopted_pack(page: Any, studio: Studio) -> None:
    slug = "e2e-scorer-compile"
    new_project(page, studio, slug)
    declare_the_scorer_in_the_spec(page, studio, slug)

    page.click("nav.tabs a:has-text('Compile')")
    page.locator("#compile-start").wait_for()
    page.fill("input[name=attempts]", "2")
    page.click("#compile-start-button")
    page.wait_for_url(re.compile(rf".*/p/{slug}/compiles/\d+/$"))
    page.locator("#compile-status", has_text="done").wait_for(timeout=WAIT_MS)
    assert page.locator("#compile-full-marks").count() == 1, page.locator("#compile-progress").inner_text()

    page.locator("#compile-attempts a", has_text="attempt").first.click()
    page.wait_for_url(re.compile(r".*/attempts/\d+/$"))
    expect(page.locator("#eval-offline")).to_contain_text("14 of 14 gold cases pass")
    expected_rule = {"line_items": {"compare": "scorer:line_items", "options": {"amount_tolerance": 0.005}, "pass": 1}}
    assert manifest_rule(page, "#attempt-diff") == expected_rule
    page.locator(
        "#attempt-diff section.diff-file", has=page.locator("h3", has_text="manifest.yaml")
    ).scroll_into_view_if_needed()
    save_screenshot(page, "scorer-compile-attempt", full_page=False)  # the page is long: its manifest diff

    page.click("#adopt-button")
    page.wait_for_url(re.compile(rf".*/p/{slug}/proposals/\d+$"))
    assert manifest_rule(page, "main") == expected_rule
    # the checks: the base and the adopted pack evaluated on the gold, the adopted one
    # comparing line_items with the host's scorer; every case passes on both sides
    page.locator("#checks[data-state=done]").wait_for(timeout=WAIT_MS)  # the page polls until both end
    expect(page.locator("#n-broken")).to_have_text("0")
    summary = page.locator("#checks-summary tr:has(td)")
    expect(summary).to_have_count(2)
    for side in range(2):
        expect(summary.nth(side).locator("td").nth(1)).to_have_text("14 / 14")

    page.locator("#checks a", has_text=re.compile(r"^eval \d+$")).last.click()  # the head's eval
    page.wait_for_url(re.compile(rf".*/p/{slug}/evals/\d+/summary$"))
    field_row = page.locator("#field-table tr", has=page.locator("td.mono", has_text=re.compile("^line_items$")))
    expect(field_row.locator("td").nth(1)).to_contain_text("scorer")
    expect(field_row.locator("td").nth(3)).to_contain_text("100")
