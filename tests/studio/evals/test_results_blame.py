"""The per-node blame page: /evals/<id>/blame."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.graph_svg import CHAR_W, LABEL_FONT_PX, LINE_H, heat_colour
from studio.projects.models import Project
from tests.support.css import STUDIO_CSS, px, rules
from tests.support.eval_results import REJECTED, sample_eval


def test_it_colours_the_graph_by_blame_share(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame")
    assert page.status_code == 200
    text = page.content.decode()
    assert f'<g class="node heat" data-node="classify" fill="{heat_colour(1.0)}">' in text  # the one failure's node
    assert f'<g class="node heat" data-node="sentiment" fill="{heat_colour(0.0)}">' in text
    assert text.count('<svg class="graph heat"') == 1  # the one graph renderer, the overview's
    assert "category must be one of" in text  # the rejection's reason
    assert 'data-node="classify"' in text


def test_it_requires_login(project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert Client().get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").status_code == 302


def test_it_hides_the_eval_from_strangers(as_stranger: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    assert as_stranger.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").status_code == 404


def test_it_shows_a_viewer_reasons_but_no_rejected_text(as_viewer: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_viewer.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame")
    assert page.status_code == 200
    assert b"category must be one of" in page.content
    assert REJECTED.encode() not in page.content


def test_it_answers_htmx_with_the_results_fragment(as_owner: Client, project: Project, owner: User) -> None:
    ev = sample_eval(project, owner)
    page = as_owner.get(
        f"/p/{ev.project.slug}/evals/{ev.pk}/blame", headers={"HX-Request": "true", "HX-Target": "results-page"}
    )
    assert page.content.decode().lstrip().startswith('<div id="results-page"')


def test_its_graph_is_drawn_at_its_own_size_with_text_of_12px_or_more(
    as_owner: Client, project: Project, owner: User
) -> None:
    """Effective text size = the CSS font size x drawn width / viewBox width. The graph has
    the page's width (not half of it), is not scaled down to its box (it scrolls there),
    and is drawn 1 px a unit, so every label is read at its CSS size."""
    ev = sample_eval(project, owner)
    text = as_owner.get(f"/p/{ev.project.slug}/evals/{ev.pk}/blame").content.decode()
    box = text[text.index('<div class="chart-box" id="blame-graph">') :]
    assert box.index('<svg class="graph heat"') < box.index("</div>")
    assert 'class="two"' not in text[: text.index('id="blame-graph"')]  # not in a half-width column
    found = re.search(r'width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"', box)
    assert found is not None
    width, height, view_w, view_h = map(int, found.groups())
    assert (width, height) == (view_w, view_h)  # drawn 1 px a unit
    css = rules(STUDIO_CSS)
    assert css["svg.graph"]["max-width"] == "none" and "height" not in css["svg.graph"]  # not scaled to its box
    assert css[".results .chart-box"]["overflow-x"] == "auto"  # a wide graph scrolls
    scale = width / view_w
    sizes = {
        "node id": px(css["svg.graph text"]["font"]),
        "node caption (its share, its failures)": px(css["svg.graph text.kind"]["font"]),
        "entry": px(css["svg.graph text.entry"]["font"]),
        "edge label": px(css["svg.graph .label text"]["font-size"]),
        "legend": px(css["svg.graph .legend text"]["font"]),
    }
    assert {name: size * scale for name, size in sizes.items() if size * scale < 12} == {}
    assert "· 1 failed" in box  # the caption that says it, in that size


def test_its_edge_label_boxes_are_sized_for_the_font_the_css_draws() -> None:
    label_px = px(rules(STUDIO_CSS)["svg.graph .label text"]["font-size"])
    assert label_px == LABEL_FONT_PX
    assert label_px * 0.6 <= CHAR_W and label_px <= LINE_H  # a monospace character is about 0.6 em wide
