"""The host tools page (/endpoints/tools): the studio registry's catalogue with each
tool's state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from studio import host_tools

ROOT = Path(__file__).resolve().parents[3]
REFUND_TOOLS = f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry"
DEGRADED = """
from runtime import tool

@tool(description="Plot a chart.", requires=("matplotlib_not_installed_xyz",))
def plot(points):
    return {}

def echo(text):
    return {"text": text}

registry = {"plot": plot, "echo": echo}
"""


@pytest.fixture(autouse=True)
def fresh_registry(settings: Any) -> Iterator[None]:
    host_tools.forget()
    yield
    host_tools.forget()


def test_it_lists_every_tool_with_its_state(as_viewer: Client, settings: Any, tmp_path: Path) -> None:
    (tmp_path / "degraded.py").write_text(DEGRADED)
    settings.PACKFORGE_TOOLS = f"{tmp_path / 'degraded.py'}:registry"
    page = as_viewer.get("/endpoints/tools")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="tool-plot"' in body and "unavailable: install matplotlib_not_installed_xyz" in body
    assert 'id="tool-echo"' in body and '<span class="ok">available</span>' in body
    assert "1 unavailable" in body


def test_it_shows_side_effects_and_argument_schemas(as_viewer: Client, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = REFUND_TOOLS
    body = as_viewer.get("/endpoints/tools").content.decode()
    refund = body[body.index('id="tool-issue_refund"') :]
    assert "side effects" in refund.split("</tr>")[0]
    assert "order_id: string, amount_usd: number" in refund.split("</tr>")[0]
    lookup = body[body.index('id="tool-lookup_order"') :].split("</tr>")[0]
    assert "read-only" in lookup


def test_it_says_when_no_registry_is_configured(as_viewer: Client, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = ""
    page = as_viewer.get("/endpoints/tools")
    assert page.status_code == 200
    assert b"PACKFORGE_TOOLS=MODULE:REGISTRY" in page.content
    assert b'id="tools-table"' not in page.content


def test_it_says_why_a_registry_does_not_load(as_viewer: Client, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = "no_such_module_xyz:registry"
    page = as_viewer.get("/endpoints/tools")
    assert page.status_code == 200
    assert b"does not load" in page.content and b"cannot import no_such_module_xyz" in page.content


def test_it_is_linked_from_the_endpoints_page(as_viewer: Client) -> None:
    assert b'href="/endpoints/tools"' in as_viewer.get("/endpoints/").content


def test_it_requires_login(db: None) -> None:
    page = Client().get("/endpoints/tools")
    assert page.status_code == 302 and page["Location"].startswith("/login/")
