"""Issue 13's authoring journeys end to end, in a real browser against a real studio and
Celery worker: the editor's keyboard and unsaved-edits warning and its highlighting, a new
project's skeleton, one problem per edge typo with Try it disabled, the evalset table's
fields and search, try-it on a model scripted by case, and the graph drawings of every
example pack (overview and coverage) checked for labels that overlap or sit on an edge.
Screenshots of each go to the folder tests/support/screenshots.py names."""

from __future__ import annotations

import re
from typing import Any

from tests.support.screenshots import save_screenshot
from tests.support.started import Studio

EXAMPLES = ["support_triage", "refund_desk", "invoice_extract", "lead_qualifier", "moderation"]

# The layout check, on the drawing as the browser laid it out: boxes from getBBox, edge
# paths sampled with getPointAtLength. A label's own edge may run under it; no other may.
LAYOUT_CHECK = """(svg) => {
  const labels = [...svg.querySelectorAll("g.labels g.label")].map((g) => ({
    edge: g.dataset.edge, box: g.querySelector("rect.label-box").getBBox(), text: g.querySelector("text").getBBox(),
  }));
  const edges = [...svg.querySelectorAll("g.edges g.edge")].map((g) => ({
    edge: g.dataset.edge, path: g.querySelector("path.line"),
  }));
  const problems = [];
  const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  const inside = (p, b) => p.x > b.x + 0.5 && p.x < b.x + b.width - 0.5 && p.y > b.y + 0.5 && p.y < b.y + b.height - 0.5;
  for (let i = 0; i < labels.length; i++) {
    const a = labels[i];
    if (a.text.x < a.box.x - 1 || a.text.x + a.text.width > a.box.x + a.box.width + 1) {
      problems.push(`the text of edge ${a.edge}'s label spills out of its box`);
    }
    for (let j = i + 1; j < labels.length; j++) {
      if (overlap(a.box, labels[j].box)) problems.push(`labels of edges ${a.edge} and ${labels[j].edge} overlap`);
    }
    for (const e of edges) {
      if (e.edge === a.edge) continue;
      const length = e.path.getTotalLength();
      for (let s = 0; s <= length; s += 1) {
        if (inside(e.path.getPointAtLength(s), a.box)) {
          problems.push(`edge ${e.edge} crosses the label of edge ${a.edge}`);
          break;
        }
      }
    }
  }
  return { labels: labels.length, edges: edges.length, problems };
}"""


def check_layout(page: Any, where: str) -> dict[str, Any]:
    svg = page.locator("svg.graph").first
    svg.wait_for()
    result: dict[str, Any] = svg.evaluate(LAYOUT_CHECK)
    assert result["edges"] > 0, where
    assert result["problems"] == [], where
    return result


def new_project(page: Any, studio: Studio, slug: str, example: str = "") -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", slug)
    if example:
        page.select_option("select[name=example]", example)
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{slug}/")


def start_eval(page: Any, studio: Studio, slug: str) -> str:
    """Start an eval of the pack on its own model; its id."""
    page.goto(f"{studio.url}/p/{slug}/evals/new")
    page.click("#eval-start-button")
    page.wait_for_url(re.compile(r".*/evals/\d+/$"))
    return re.search(r"/evals/(\d+)/", page.url).group(1)  # type: ignore[union-attr]


def wait_for_eval(page: Any, studio: Studio, slug: str, eval_id: str) -> None:
    page.goto(f"{studio.url}/p/{slug}/evals/{eval_id}/")
    page.locator("#eval-results").wait_for(timeout=240_000)  # shown once the poller stops


def test_every_example_packs_drawings_keep_labels_apart_and_explain_their_styles(page: Any, studio: Studio) -> None:
    evals = {name: start_eval(page, studio, name) for name in EXAMPLES}
    for name in EXAMPLES:
        page.goto(f"{studio.url}/p/{name}/")
        check_layout(page, f"{name} overview")
        legend = "\n".join(page.locator("svg.graph g.legend text").all_text_contents())
        assert "next:" in legend and "entry" in legend, name
        for kind in page.locator("svg.graph g.edges g.edge").evaluate_all(
            "(gs) => [...new Set(gs.map((g) => [...g.classList].find((c) => c.startsWith('edge-')).slice(5)))]"
        ):
            assert f"{kind}:" in legend, (name, kind)  # every edge style used is explained
        save_screenshot(page, f"graph-{name}-overview")
    for name, eval_id in evals.items():
        wait_for_eval(page, studio, name, eval_id)
        page.goto(f"{studio.url}/p/{name}/evals/{eval_id}/coverage")
        check_layout(page, f"{name} coverage")
        legend = "\n".join(page.locator("svg.graph g.legend text").all_text_contents())
        assert "thicker: taken by more runs" in legend, name
        if page.locator("svg.graph g.edge.untaken").count():
            assert "untaken: no run took this edge" in legend, name
        taken_fail = page.locator("svg.graph g.edge.edge-on_fail:not(.untaken) path.line")
        for i in range(taken_fail.count()):  # a taken on_fail edge is dashed its own way, never dotted
            assert taken_fail.nth(i).get_attribute("stroke-dasharray") == "9 4", name
        save_screenshot(page, f"graph-{name}-coverage")


def test_a_person_edits_with_the_keyboard_and_is_warned_before_losing_edits(page: Any, studio: Studio) -> None:
    new_project(page, studio, "keys", "support_triage")
    page.goto(f"{studio.url}/p/keys/files/graph.yaml")
    editor = page.locator("textarea#content")
    page.locator("pre.highlight .hljs-attr").first.wait_for()  # YAML keys highlighted under the text
    assert editor.evaluate("(t) => getComputedStyle(t).color") == "rgba(0, 0, 0, 0)"
    save_screenshot(page, "editor-graph-yaml-highlighted")

    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Tab")  # Tab indents
    assert editor.input_value().endswith("  ")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")  # Esc then Tab leaves the text
    assert page.evaluate("document.activeElement.name") == "message"
    assert editor.input_value().endswith("  ")

    # An htmx tab: asked, and staying keeps the text.
    questions: list[str] = []

    def dismiss(dialog: Any) -> None:
        questions.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.click("nav.tabs a:has-text('History')")
    page.wait_for_function("() => document.querySelector('textarea#content') !== null")
    assert questions == ["confirm"] and page.url.endswith("/files/graph.yaml")
    # A plain link: the browser's own question (beforeunload).
    page.click("nav.tabs a:has-text('Deployments')")
    page.wait_for_function("() => true")
    assert questions[-1] == "beforeunload" and page.url.endswith("/files/graph.yaml")
    page.remove_listener("dialog", dismiss)

    # Ctrl+S saves (from the text, with a message), and then nothing asks.
    editor.fill(editor.input_value().rstrip() + "\n# a note\n")
    page.fill("input[name=message]", "Note in the graph")
    editor.focus()
    page.keyboard.press("Control+s")
    page.get_by_text("Saved").first.wait_for()
    assert "# a note" in page.locator("textarea#content").input_value()
    page.click("nav.tabs a:has-text('History')")
    page.locator("#history").wait_for()
    assert "Note in the graph" in page.locator("#history").inner_text()

    page.goto(f"{studio.url}/p/keys/files/prompts/classify.txt")
    page.locator("pre.highlight .hljs-template-variable").first.wait_for()  # {{ input.ticket }}
    page.goto(f"{studio.url}/p/keys/files/grammars/classify.json")
    page.locator("pre.highlight .hljs-attr").first.wait_for()


def test_a_new_empty_project_starts_from_a_skeleton_whose_eval_passes(page: Any, studio: Studio) -> None:
    new_project(page, studio, "skeleton")
    check_layout(page, "skeleton overview")
    assert page.locator("svg.graph g.nodes g.node").count() == 2
    page.click("#format-doc")
    page.locator("h2#manifest-yaml").wait_for()
    page.goto(f"{studio.url}/p/skeleton/files/manifest.yaml")
    assert "docs/pack-format.md" in page.locator("textarea#content").input_value()
    assert "The whole pack loads" in page.locator("#problems").inner_text()
    save_screenshot(page, "skeleton-manifest")
    eval_id = start_eval(page, studio, "skeleton")
    wait_for_eval(page, studio, "skeleton", eval_id)
    assert page.locator("#eval-status").inner_text() == "done"
    assert (page.locator("#count-passed").inner_text(), page.locator("#count-failed").inner_text()) == ("1", "0")


def test_one_typo_in_an_edge_gives_one_problem_and_disables_try_it(page: Any, studio: Studio) -> None:
    new_project(page, studio, "typo", "support_triage")
    page.goto(f"{studio.url}/p/typo/files/graph.yaml")
    editor = page.locator("textarea#content")
    text = editor.input_value()
    assert "{from: classify, to: extract}" in text
    editor.fill(text.replace("{from: classify, to: extract}", "{from: classify, to: extrct}", 1))
    page.locator("#problems").get_by_text("unknown node 'extrct'").wait_for()
    assert page.locator("#problems ul.problems li").count() == 1
    page.fill("input[name=message]", "A typo")
    page.click("#save-form button[type=submit]:has-text('Save')")
    page.get_by_text("Saved").first.wait_for()
    page.goto(f"{studio.url}/p/typo/")
    assert page.locator("#try-it").is_disabled() and page.locator("#run-eval").is_disabled()
    assert "unknown node 'extrct'" in page.locator("#blocked-reason").inner_text()
    save_screenshot(page, "pack-does-not-load-buttons-disabled")
    page.goto(f"{studio.url}/p/typo/runs/new")
    assert page.locator("#try-run").is_disabled()


def test_a_person_searches_the_evalset_and_expands_a_long_input(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/p/support_triage/evalset/")
    row = page.locator("tr#case-1")
    assert "category:billing" in row.inner_text().replace(" ", "").replace("\n", "")
    page.fill("#case-search", "espresso")
    page.locator("#search-count").wait_for()
    assert page.locator("table#cases tr[id^=case-]").count() == 1
    assert "st-05" in page.locator("table#cases").inner_text()
    long = page.locator("table#cases details").first
    if long.count():
        long.locator("summary").click()
        assert long.locator(".full").is_visible()
    save_screenshot(page, "evalset-search")


def test_try_it_on_a_model_scripted_by_case_offers_the_evalset_cases(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/p/support_triage/runs/new")
    assert "scripted by evalset case" in page.locator("#case-keyed").inner_text()
    page.select_option("#case-select", "st-03")
    assert "jane.new@example.com" in page.locator("textarea[name=input]").input_value()
    save_screenshot(page, "try-it-case-keyed")
    page.click("#try-run")
    page.wait_for_url(re.compile(r".*/runs/\d+$"))
    page.get_by_text("account_team").first.wait_for(timeout=60_000)  # st-03's end, as its script answers
