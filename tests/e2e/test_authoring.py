"""Issue 4 end to end, as a person does it: log in, create a project from an example,
break a grammar and see the error beside it, fix it, save, view the diff, download the
.zip, and `packforge eval` the download with its scripted model."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from tests.support.started import ROOT, Studio


def test_a_person_authors_a_pack_and_evaluates_the_download(page: Any, studio: Studio, tmp_path: Path) -> None:
    page.goto(f"{studio.url}/new")
    page.fill("input[name=slug]", "e2e-triage")
    page.select_option("select[name=example]", "support_triage")
    page.click("main form button[type=submit]")
    page.wait_for_url(f"{studio.url}/p/e2e-triage/")
    assert page.locator("svg.graph").count() == 1

    page.goto(f"{studio.url}/p/e2e-triage/files/grammars/classify.json")
    editor = page.locator("textarea#content")
    original = editor.input_value()
    editor.fill('{\n  "type": "object",\n  oops\n}')
    problems = page.locator("#problems")
    problems.get_by_text("JSON syntax error").wait_for()
    assert "line 3" in problems.inner_text()

    editor.fill(original.replace('"billing"', '"billing", "refunds"', 1))
    page.locator("#problems .valid").first.wait_for()
    page.fill("input[name=message]", "Accept a refunds category")
    page.click("#save-form button[type=submit]:has-text('Save')")
    page.get_by_text("Accept a refunds category").first.wait_for()

    page.goto(f"{studio.url}/p/e2e-triage/history/")
    page.click("#history button[type=submit]")
    page.wait_for_url("**/diff/**")
    diff = page.locator("#project-page").inner_text()
    assert "grammars/classify.json" in diff and "refunds" in diff

    page.goto(f"{studio.url}/p/e2e-triage/history/")
    with page.expect_download() as info:
        page.locator("a:has-text('.zip')").first.click()
    archive = tmp_path / "pack.zip"
    info.value.save_as(archive)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "unpacked")
    pack_dir = tmp_path / "unpacked" / "e2e-triage"
    assert b'"refunds"' in (pack_dir / "grammars" / "classify.json").read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "runtime", "eval", str(pack_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "15/15 cases passed" in result.stdout
