"""Every benchmark script the README cites still starts: `--help` imports all it needs
and parses its options. A module split once left benchmarks/compile.py importing a name
that had moved, and nothing ran it until its numbers were wanted again."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.started import ROOT

SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))


def test_the_docs_cite_only_scripts_that_exist() -> None:
    docs = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks" / "packs").glob("*/README.md")]
    names = {p.name for p in SCRIPTS}
    cited = {name: doc.name for doc in docs for name in re.findall(r"benchmarks/(\w+\.py)", doc.read_text())}
    assert cited and set(cited) <= names, {n: d for n, d in cited.items() if n not in names}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_it_starts_and_prints_its_usage(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:200]
