"""The summary page's tool table: the runtime's tool metrics over the stored traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.projects.models import create_project
from studio.projects.views import example_files
from tests.support.eval_results import make_eval, run_example, store_report

ROOT = Path(__file__).resolve().parents[3]


def test_it_shows_tool_use_with_precision_per_tool(as_owner: Client, owner: User, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = f"{ROOT / 'packs' / 'calculator' / 'tools.py'}:registry"
    project = create_project(
        slug="calc", name="Calculator", owner=owner, pack_files=example_files("calculator"), message="Create"
    )
    _, report = run_example("calculator")
    ev = make_eval(project, owner)
    store_report(ev, report)
    page = as_owner.get(f"/p/calc/evals/{ev.pk}/summary")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="tool-table"' in text
    t = report.tool_metrics()
    assert f"{t['tool_calls']} tool calls" in text
    assert f"{t['invalid_choices']} invalid choices" in text
    assert f"tool precision {t['precision']:.2f}" in text
    assert f'<td class="mono">multiply</td><td class="num">{t["per_tool"]["multiply"]["calls"]}</td>' in text


def test_it_shows_no_tool_table_for_a_pack_without_tools(as_owner: Client, owner: User, project: Any) -> None:
    _, report = run_example("support_triage")
    ev = make_eval(project, owner)
    store_report(ev, report)
    page = as_owner.get(f"/p/{project.slug}/evals/{ev.pk}/summary")
    assert page.status_code == 200
    assert 'id="tool-table"' not in page.content.decode()
