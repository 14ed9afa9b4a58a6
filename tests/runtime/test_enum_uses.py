"""Cross-file checks at load (runtime.pack.enums): a value a grammar no longer allows,
still used by a `when:` edge or an evalset case, is a load problem at its line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack
from runtime.errors import PackInvalid
from tests.support.runtime_packs import write_pack

SCHEMA = {
    "type": "object",
    "required": ["category"],
    "properties": {"category": {"type": "string", "enum": ["billing", "technical", "other"]}},
}


def routed(tmp_path: Path, when: str, expected: Any = "billing", **manifest: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        manifest=manifest or None,
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "refunds": {"kind": "end"},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "refunds", "when": when}, {"from": "classify", "to": "done"}],
        grammars={"classify": SCHEMA},
        script={"nodes": {"classify": {"category": "billing"}}},
        cases=[{"id": "c1", "input": {"ticket": "t"}, "expected": {"category": expected}}],
    )


def problems(root: Path) -> list[str]:
    with pytest.raises(PackInvalid) as caught:
        load_pack(root)
    return [str(i) for i in caught.value.issues]


def test_a_when_literal_the_grammar_no_longer_allows_is_a_problem_at_its_line(tmp_path: Path) -> None:
    (found,) = problems(routed(tmp_path, "category == 'refund'"))
    assert found.startswith("graph.yaml:")
    assert (
        "edge classify -> refunds: when compares category to 'refund', which grammars/classify.json does not allow "
        "(billing, other, technical); the edge can never be taken" in found
    )


@pytest.mark.parametrize("when", ["'refund' != category", "category in ['billing', 'refund']"])
def test_every_comparison_form_is_checked(tmp_path: Path, when: str) -> None:
    assert any("'refund'" in p for p in problems(routed(tmp_path, when)))


def test_an_evalset_value_the_grammar_no_longer_allows_is_a_problem_at_its_line(tmp_path: Path) -> None:
    (found,) = problems(routed(tmp_path, "category == 'billing'", expected="refund"))
    assert found == (
        "evalset.jsonl:1: case 'c1': expected.category 'refund' is not a value grammars/classify.json allows "
        "(billing, other, technical); the case can never pass"
    )


def test_values_the_grammar_allows_load(tmp_path: Path) -> None:
    assert load_pack(routed(tmp_path, "category == 'billing' or category in ['other']")).edges[0].when is not None
