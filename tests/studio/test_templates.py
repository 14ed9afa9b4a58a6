"""House rules for the templates: CSS lives in static files (no <style> element, no
style="" attribute, so an htmx partial never carries CSS), and each section's nav is
written once, in its section base (projects/base.html, evals/base.html)."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "frontend" / "templates"


def _templates() -> list[Path]:
    found = sorted(TEMPLATES.rglob("*.html"))
    assert found
    return found


def test_it_keeps_css_out_of_every_template() -> None:
    for template in _templates():
        text = template.read_text()
        assert "<style" not in text, template
        assert not re.search(r"\sstyle\s*=", text), template


def test_it_writes_the_htmx_swap_attributes_of_tabs_and_pagers_once() -> None:
    with_swaps = [t.relative_to(TEMPLATES).as_posix() for t in _templates() if 'hx-push-url="true"' in t.read_text()]
    # one include; the cost table's sortable headers (with aria-sort) are the one other place
    assert sorted(with_swaps) == ["_tab.html", "evals/results_cost.html"]
    assert (TEMPLATES / "evals/results_cost.html").read_text().count("hx-push-url") == 1


SECTIONS = {
    "projects": "overview files editor evalset evalset_case history diff download_error",
    "evals": "results_summary results_blame results_coverage results_tiers results_cost results_case "
    "results_compare results_history",
}


def test_it_gives_each_section_one_base_that_every_page_extends() -> None:
    for section, pages in SECTIONS.items():
        for page in pages.split():
            text = (TEMPLATES / section / f"{page}.html").read_text()
            assert text.startswith(f'{{% extends "{section}/base.html" %}}'), page
            assert "_nav" not in text and 'class="tabs"' not in text, page
