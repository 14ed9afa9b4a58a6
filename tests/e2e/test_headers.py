"""The studio's pages under their Content-Security-Policy (script-src 'self', no inline
script or style), in a real browser: the editor, highlight.js, the confirm before a
delete, try-it's case picker and the API's Swagger page still work, and no page reports
a violation (the `page` fixture fails a test that meets one)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.started import Studio


def new_project(page: Any, studio: Studio, slug: str, example: str) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", slug)
    page.select_option("select[name=example]", example)
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/{slug}/")


def _policy(page: Any, url: str) -> str:
    answer = page.goto(url)
    assert answer is not None and answer.ok, url
    return str(answer.headers.get("content-security-policy", ""))


def test_the_editor_works_under_the_policy(page: Any, studio: Studio) -> None:
    new_project(page, studio, "csp", "support_triage")
    policy = _policy(page, f"{studio.url}/p/csp/files/graph.yaml")
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    page.locator("pre.highlight .hljs-attr").first.wait_for()  # highlight.js ran
    editor = page.locator("textarea#content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Tab")  # editor.js: Tab indents
    assert editor.input_value().endswith("  ")
    assert page.locator(".code-editor .gutter").inner_text().startswith("1\n2")


def test_a_delete_asks_first_and_cancel_keeps_the_file(page: Any, studio: Studio) -> None:
    new_project(page, studio, "csp-delete", "support_triage")
    page.goto(f"{studio.url}/p/csp-delete/files/prompts/classify.txt")
    questions: list[str] = []

    def dismiss(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.click("form.delete-form button[type=submit]")
    assert questions and questions[0].startswith("Delete prompts/classify.txt?")
    assert page.url.endswith("/files/prompts/classify.txt")


def test_try_it_fills_the_input_from_a_case(page: Any, studio: Studio) -> None:
    page.goto(f"{studio.url}/p/support_triage/runs/new")
    page.select_option("#case-select", "st-03")
    assert "jane.new@example.com" in page.locator("textarea[name=input]").input_value()


def test_the_api_docs_render_under_the_policy(page: Any, studio: Studio) -> None:
    policy = _policy(page, f"{studio.url}/api/docs")
    assert "script-src 'self'" in policy
    page.locator("#swagger-ui .information-container").wait_for()
    assert re.search(r"Packforge", page.locator("#swagger-ui").inner_text())
