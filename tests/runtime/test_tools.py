"""Loading a host's tool registry (runtime.load_tools), as the CLI and the studio do."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import BadSpec, load_tools


def test_it_loads_a_registry_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text("def send(**kw):\n    return kw\n\nregistry = {'send': send}\n")
    tools = load_tools(f"{tmp_path / 'tools.py'}:registry")
    assert tools is not None and tools["send"](a=1) == {"a": 1}


def test_it_loads_nothing_when_no_registry_is_named() -> None:
    assert load_tools(None) is None


@pytest.mark.parametrize(
    "ref, message",
    [
        ("no_colon", "must look like MODULE:REGISTRY"),
        ("nomodule_xyz:reg", "cannot import nomodule_xyz"),
        ("json:dumps", "must be a dict of tool name -> function"),
        ("missing.py:reg", "no such file missing.py"),
    ],
)
def test_it_words_its_errors_for_any_caller(ref: str, message: str) -> None:
    with pytest.raises(BadSpec, match=message) as exc:
        load_tools(ref)
    assert "--tools" not in str(exc.value)
