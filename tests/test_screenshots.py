"""tests/support/screenshots.py: where the browser tests keep their screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.screenshots import ROOT, save_screenshot, screenshots_dir


class FakePage:
    """Playwright's page, as far as save_screenshot uses it: it writes a file at `path`."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def screenshot(self, *, path: str, full_page: bool) -> None:
        self.calls.append({"path": path, "full_page": full_page})
        Path(path).write_bytes(b"\x89PNG")


def test_it_writes_under_packforge_artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACKFORGE_ARTIFACTS", str(tmp_path))
    page = FakePage()
    saved = save_screenshot(page, "refund desk/blame")
    assert saved == tmp_path / "screenshots" / "refund-desk-blame.png" and saved.read_bytes() == b"\x89PNG"
    assert page.calls == [{"path": str(saved), "full_page": True}]


def test_it_defaults_to_var_artifacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PACKFORGE_ARTIFACTS", raising=False)
    assert screenshots_dir() == ROOT / "var" / "artifacts" / "screenshots"
