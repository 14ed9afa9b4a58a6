"""Every spec in specs/ builds with the rules planner to a pack that loads and passes its
gold cases on the offline test model (issue 24: calculator's choose_tool loop included).
Without a target nothing is judged on a model; that is the verdict's business, not
this test's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler import RulesPlanner, build, load_spec
from runtime import evaluate, load_pack, load_tools, open_backend

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p.parent.name for p in (ROOT / "specs").glob("*/spec.yaml"))


def registry_for(name: str) -> dict[str, Any] | None:
    tools = ROOT / "packs" / name / "tools.py"
    return load_tools(f"{tools}:registry") if tools.exists() else None


def test_it_has_the_specs_to_build() -> None:
    assert {"calculator", "refund_desk", "expense_approval"} <= set(SPECS)


@pytest.mark.parametrize("name", SPECS)
def test_every_spec_builds_to_a_pack_that_loads_and_passes_offline(name: str, tmp_path: Path) -> None:
    spec = load_spec(ROOT / "specs" / name)
    registry = registry_for(name)
    assert (registry is not None) == bool(spec.tools)
    result = build(spec, RulesPlanner(), tmp_path / "work", out=tmp_path / "pack", tools=registry)
    assert result.best == 1, [(a.status, a.problems) for a in result.attempts]
    assert result.full_marks and result.stopped == "full_marks"
    assert result.out is not None
    pack = load_pack(result.out, tools=set(registry) if registry is not None else None)
    report = evaluate(pack, open_backend("fake:fakes/offline.json", base_dir=result.out), tools=registry)
    assert [c.case_id for c in report.cases if not c.passed] == []
    assert report.total == len(spec.gold)
    offline = json.loads((tmp_path / "work" / "attempts" / "1" / "offline.json").read_text())
    assert offline["offline_notes"] == {}
