"""The studio's stylesheets as rules, for tests that check what a page's CSS says
(no browser here: tests/e2e measures the drawn page)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUDIO_CSS = ROOT / "frontend" / "static" / "studio" / "studio.css"
REVIEW_CSS = ROOT / "studio" / "review" / "static" / "review" / "review.css"


def rules(*sheets: Path) -> dict[str, dict[str, str]]:
    """selector -> {property: value}, in the sheets' order (a later declaration wins, as
    in the browser for rules of the same selector). @import lines are left out; a sheet
    with an @media block is refused (its rules would read as unconditional)."""
    found: dict[str, dict[str, str]] = {}
    for sheet in sheets:
        text = re.sub(r"/\*.*?\*/", "", sheet.read_text(), flags=re.S)
        text = re.sub(r"@import[^;]*;", "", text)
        assert "@media" not in text, f"{sheet}: rules() reads no @media blocks"
        for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
            declared = {}
            for part in body.split(";"):
                name, colon, value = part.partition(":")
                if colon:
                    declared[name.strip()] = value.strip()
            for selector in selectors.split(","):
                found.setdefault(" ".join(selector.split()), {}).update(declared)
    return found


def px(value: str) -> float:
    """The size in a `font` or `font-size` value, in px ("13px ui-monospace, ..." -> 13)."""
    got = re.search(r"(\d+(?:\.\d+)?)px", value)
    assert got is not None, f"no px size in {value!r}"
    return float(got.group(1))
