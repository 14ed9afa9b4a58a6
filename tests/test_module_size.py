"""Modules stay small: no module of runtime/, compiler/ or studio/ (migrations aside) is
longer than MAX_LINES. The modules listed in OVER were longer when this test was
written; each may shrink, never grow, and leaves the list once it is under the limit
(the test says so when one has)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
PACKAGES = ("runtime", "compiler", "studio")
# module -> its length when it was listed: the ceiling it may not pass
OVER = {}


def _lengths(root: Path = ROOT) -> dict[str, int]:
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            with open(path, encoding="utf-8") as fh:
                out[path.relative_to(root).as_posix()] = sum(1 for _ in fh)
    return out


def _too_long(lengths: dict[str, int]) -> dict[str, int]:
    return {m: n for m, n in lengths.items() if n > MAX_LINES and n > OVER.get(m, MAX_LINES)}


def test_no_module_is_longer_than_the_limit_and_the_listed_ones_do_not_grow() -> None:
    too_long = _too_long(_lengths())
    assert too_long == {}, f"split these modules (at most {MAX_LINES} lines; listed ones at most their ceiling)"


def test_the_check_fails_on_a_module_padded_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a copy of a real module padded to one line past the limit is
    caught, a migration of any length is not, and a listed module may not grow."""
    source = (ROOT / "runtime" / "errors.py").read_text(encoding="utf-8").splitlines()
    padded = tmp_path / "runtime" / "errors.py"
    padded.parent.mkdir()
    padded.write_text("\n".join(source + ["# padding"] * (MAX_LINES + 1 - len(source))) + "\n", encoding="utf-8")
    migration = tmp_path / "studio" / "app" / "migrations" / "0001_initial.py"
    migration.parent.mkdir(parents=True)
    migration.write_text("x = 1\n" * (MAX_LINES * 2), encoding="utf-8")
    assert _too_long(_lengths(tmp_path)) == {"runtime/errors.py": MAX_LINES + 1}
    monkeypatch.setitem(OVER, "studio/listed.py", 552)  # a listed module, as one once was
    listed, ceiling = next(iter(OVER.items()))
    assert _too_long({listed: ceiling}) == {} and _too_long({listed: ceiling + 1}) == {listed: ceiling + 1}


def test_the_list_of_long_modules_only_names_modules_that_are_still_long() -> None:
    lengths = _lengths()
    done = sorted(m for m in OVER if lengths.get(m, 0) <= MAX_LINES)
    assert done == [], "these modules are short now: remove them from OVER"
