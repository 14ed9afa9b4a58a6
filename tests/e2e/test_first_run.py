"""Issue 13's first-run polish, in a real browser against a real studio (scripts/start):
error pages in the studio's layout with its navigation, the favicon, the cost histogram's
marks labelled with their real values inside a drawing that fills its box, and the eval
progress table's numbers right under their headers. Screenshots of each go to the folder
CI keeps (tests/support/screenshots.py)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.screenshots import save_screenshot
from tests.support.started import Studio

NAV = ["Projects", "Endpoints", "Review", "API tokens", "API"]


def _nav(page: Any) -> list[str]:
    return [str(t).strip() for t in page.locator("header.top nav a").all_inner_texts()]


def test_an_unknown_address_and_a_refused_form_answer_in_the_layout_with_navigation(page: Any, studio: Studio) -> None:
    response = page.goto(f"{studio.url}/p/support_triage/no-such-page")
    assert response.status == 404
    assert set(NAV) <= set(_nav(page))
    assert page.locator("h1").inner_text() == "There is nothing here"
    assert "Traceback" not in page.content()
    save_screenshot(page, "error-404")
    page.locator("header.top nav a", has_text="Projects").click()  # the way on works
    page.wait_for_url(f"{studio.url}/")

    # A form sent without its security token (as from a page left open across a log-out).
    page.evaluate(
        """() => { const f = document.createElement('form'); f.method = 'post'; f.action = '/tokens/';
                   document.body.append(f); f.submit(); }"""
    )
    page.wait_for_url(f"{studio.url}/tokens/")
    assert page.locator("p.error-status").inner_text() == "403"
    assert set(NAV) <= set(_nav(page))
    assert "reload the page and send it again" in page.locator("main").inner_text()
    save_screenshot(page, "error-403")


def test_every_page_has_the_favicon(page: Any, studio: Studio) -> None:
    for url in ("/", "/no-such-page", "/login/"):
        page.goto(studio.url + url)
        href = page.locator("link[rel=icon]").get_attribute("href")
        assert href == "/static/studio/favicon.svg"
    loaded = page.evaluate(
        """async (href) => { const img = new Image(); img.src = href; await img.decode();
                             return [img.naturalWidth, img.naturalHeight]; }""",
        "/static/studio/favicon.svg",
    )
    assert loaded[0] > 0 and loaded[1] > 0
    icon = page.request.get(f"{studio.url}/favicon.ico")  # follows the redirect
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def _start_eval(page: Any, studio: Studio) -> str:
    page.goto(f"{studio.url}/p/support_triage/evals/new")
    page.click("#eval-start-button")  # the pack's own (scripted) model, checked by default
    page.wait_for_url(re.compile(r".*/evals/\d+/$"))
    eval_id = re.search(r"/evals/(\d+)/", page.url).group(1)  # type: ignore[union-attr]
    page.locator("#eval-results").wait_for(timeout=120_000)  # shown once the poller stops
    return str(eval_id)


def test_the_eval_pages_line_numbers_up_and_label_the_histogram_with_real_values(page: Any, studio: Studio) -> None:
    eval_id = _start_eval(page, studio)

    # The progress table: each number's right edge under its header's right edge.
    edges = page.evaluate(
        """() => {
          const right = (el) => { const r = document.createRange(); r.selectNodeContents(el);
                                  return r.getBoundingClientRect().right; };
          const table = document.getElementById('eval-counts');
          const heads = [...table.rows[0].cells], cells = [...table.rows[1].cells];
          return heads.map((h, i) => [h.innerText, right(h), right(cells[i])]);
        }"""
    )
    assert len(edges) >= 5
    for header, head_right, number_right in edges:
        assert abs(head_right - number_right) < 1.5, (header, head_right, number_right)
    save_screenshot(page, "eval-progress-table")

    page.goto(f"{studio.url}/p/support_triage/evals/{eval_id}/cost")
    chart = page.locator(".chart-box svg.chart").first
    marks = chart.locator("text.mark")
    assert marks.count() == 2
    for i, name in enumerate(("p50", "p95")):
        assert re.fullmatch(rf"{name} \$0\.\d{{6}}", marks.nth(i).text_content()), marks.nth(i).text_content()
        assert marks.nth(i).text_content() != f"{name} $0"
    # Each label wholly inside the drawing (nothing cut at its edge), the labels apart.
    boxes = chart.evaluate(
        """(svg) => { const view = svg.viewBox.baseVal;
                      return [[view.width, view.height],
                              [...svg.querySelectorAll('text.mark')].map(t => { const b = t.getBBox();
                                 return [b.x, b.y, b.x + b.width, b.y + b.height]; })]; }"""
    )
    (width, height), labels = boxes
    for x0, y0, x1, y1 in labels:
        assert x0 >= 0 and x1 <= width and y0 >= 0 and y1 <= height, (labels, width)
    (a0, ay0, a1, ay1), (b0, by0, b1, by1) = labels
    assert a1 <= b0 or b1 <= a0 or ay1 <= by0 or by1 <= ay0, labels  # no overlap
    # The drawing fills its box.
    drawn, box = chart.bounding_box(), page.locator(".chart-box").first.bounding_box()
    assert drawn["width"] >= 0.95 * (box["width"] - 20), (drawn, box)
    save_screenshot(page, "eval-cost-histogram")


def test_the_history_diff_names_files_as_the_api_does(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/p/moderation/")
    csrf = {"X-CSRFToken": next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")}
    head = page.request.get(f"{studio.url}/api/projects/moderation").json()["head"]
    saved = page.request.put(
        f"{studio.url}/api/projects/moderation/files",
        data={"base": head, "message": "A note", "files": {"notes/why.md": "Because.\n"}},
        headers=csrf,
    )
    assert saved.status == 200, saved.text()
    assert [c["path"] for c in saved.json()["changes"]] == ["notes/why.md"]

    page.goto(f"{studio.url}/p/moderation/history/")
    page.locator("#history a", has_text="changes").first.click()
    page.wait_for_url(re.compile(r".*/diff/\?a=.*"))
    headings = page.locator(".diff-file h3").all_inner_texts()
    assert [h.split(maxsplit=1)[1] for h in headings] == ["notes/why.md"], headings
    save_screenshot(page, "history-diff")
