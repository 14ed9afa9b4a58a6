"""Cross-file checks (runtime.enum_problems): a value a grammar no longer allows, still
used by a `when:` edge or an evalset case, is a problem at its line; the pack still
loads (a compiler attempt that left a gold value out of its enum is judged, not
refused), and `packforge validate` prints it as a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import enum_problems, load_pack
from tests.support.runtime_packs import pf, write_pack

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
    return [str(i) for i in enum_problems(load_pack(root))]


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


def test_values_the_grammar_allows_are_no_problem(tmp_path: Path) -> None:
    assert problems(routed(tmp_path, "category == 'billing' or category in ['other']")) == []


def test_a_field_compared_loose_may_spell_its_gold_value_otherwise(tmp_path: Path) -> None:
    root = routed(tmp_path, "category == 'billing'", expected="Billing", fields={"category": {"compare": "loose"}})
    assert problems(root) == []


def test_validate_prints_them_as_warnings_and_exits_0(tmp_path: Path) -> None:
    done = pf("validate", str(routed(tmp_path, "category == 'refund'")))
    assert done.returncode == 0, done.stderr
    assert "warning: graph.yaml:" in done.stdout and "the edge can never be taken" in done.stdout
