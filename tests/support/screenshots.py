"""Screenshots the browser tests (tests/e2e) take of the pages they visit, kept for people
to look at: CI keeps the folder (.ci/run prints where it is).

The folder is `$PACKFORGE_ARTIFACTS/screenshots/` when PACKFORGE_ARTIFACTS is set, else
`var/artifacts/screenshots/` in the checkout (var/ is ignored by git)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def screenshots_dir() -> Path:
    """The folder screenshots are written to (created on first use)."""
    base = os.environ.get("PACKFORGE_ARTIFACTS")
    root = Path(base) if base else ROOT / "var" / "artifacts"
    folder = root / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_name(name: str) -> str:
    stem = name[:-4] if name.lower().endswith(".png") else name
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "screenshot"
    return f"{stem}.png"


def save_screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save a PNG of the Playwright `page` as `<screenshots dir>/<name>.png` and return its path.

    `name` may hold slashes or spaces; they become dashes so every screenshot lies flat in the
    one folder, named after the journey and page (e.g. "refund-eval-blame")."""
    path = screenshots_dir() / _file_name(name)
    page.screenshot(path=str(path), full_page=full_page)
    return path
