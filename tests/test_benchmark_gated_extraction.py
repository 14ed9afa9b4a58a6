"""benchmarks/packs/shipping_details_gated is shipping_details' task in one verified call:
the same gold cases, examples, system prompt, prompt and schema as the quorum pack (and as
real_models.py's one-call arm), with a gate on the least sure of the five fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import real_models
from runtime import load_pack

PACKS = Path(__file__).resolve().parents[1] / "benchmarks" / "packs"
SAME = ["evalset.jsonl", "examples.jsonl", "system.txt", "prompts/extract.txt", "grammars/extract.json"]


@pytest.mark.parametrize("name", SAME)
def test_it_shares_the_quorum_packs_files(name: str) -> None:
    assert (PACKS / "shipping_details_gated" / name).read_bytes() == (PACKS / "shipping_details" / name).read_bytes()


def test_one_greedy_draw_gated_on_every_field() -> None:
    pack = load_pack(PACKS / "shipping_details_gated")
    node = pack.nodes["extract"]
    assert node.samples == 1 and node.temperature == 0 and node.confidence is not None
    assert node.confidence.fields == tuple(node.writes) == ("name", "street", "city", "postcode", "country")
    assert pack.outgoing("extract", "on_unsure") and pack.outgoing("extract", "on_fail")


def test_real_models_runs_it_against_the_quorum_packs_one_call() -> None:
    gated, quorum = real_models.load_task("shipping_details_gated"), real_models.load_task("shipping_details")
    assert gated.one_call_prompt == quorum.one_call_prompt and gated.system == quorum.system
    assert gated.union_schema == quorum.union_schema and gated.shots == quorum.shots
    assert real_models.gates(gated) == {
        "extract": {"kind": "confidence", "field": ["name", "street", "city", "postcode", "country"], "min": 0.11}
    }
