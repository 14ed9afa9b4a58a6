"""The example packs: each validates and passes its own evalset offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import load_pack
from runtime.cli import load_tools
from tests.support.runtime_packs import pf

PACKS = Path(__file__).resolve().parents[2] / "packs"
NAMES = sorted(p.name for p in PACKS.iterdir() if (p / "manifest.yaml").exists())


def tools_args(name: str) -> list[str]:
    tools = PACKS / name / "tools.py"
    return ["--tools", f"{tools}:registry"] if tools.exists() else []


@pytest.mark.parametrize("name", NAMES)
def test_it_passes_its_own_evalset(name: str) -> None:
    out = pf("eval", str(PACKS / name), *tools_args(name))
    assert out.returncode == 0, out.stdout + out.stderr
    pack = load_pack(PACKS / name)
    assert len(pack.cases) >= 12
    assert f"{len(pack.cases)}/{len(pack.cases)} cases passed" in out.stdout


def test_together_they_use_every_node_kind_and_edge_type() -> None:
    kinds, edges = set(), set()
    for name in NAMES:
        registry = load_tools(f"{PACKS / name / 'tools.py'}:registry") if (PACKS / name / "tools.py").exists() else {}
        pack = load_pack(PACKS / name, tools=set(registry or {}))
        kinds |= {n.kind for n in pack.nodes.values()}
        edges |= {("when" if e.when else e.kind) for e in pack.edges}
    assert kinds == {"generate", "assert", "tool", "choose_tool", "human", "end"}
    assert edges == {"next", "when", "on_fail", "on_unsure"}
    assert {"support_triage", "refund_desk"} <= set(NAMES) and len(NAMES) >= 5


def test_support_triage_runs_from_the_readme() -> None:
    ticket = (
        "Hi, I was charged TWICE for order ORD-48213 ($59.98 each time). I want one of the charges "
        "reversed today or I'm disputing it with my bank."
    )
    out = pf("run", str(PACKS / "support_triage"), "--input", json.dumps({"ticket": ticket}))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "amount_usd": 59.98,
        "category": "billing",
        "order_id": "ORD-48213",
        "priority": "p1",
        "sentiment": "angry",
    }
