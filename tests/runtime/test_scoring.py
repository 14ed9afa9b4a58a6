"""Scoring beyond pass/fail: partial credit, per-field accuracy, F1 over set labels, and
the trivial baseline, as pure functions and in `packforge eval`'s reports."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import evaluate, load_pack, open_backend
from runtime.pack.fields import COMPARES, FieldRule, group, values_match
from runtime.scoring import baseline_summary, case_score, field_table, mode, set_f1
from tests.support.runtime_packs import pf, write_pack

LABELS = st.lists(st.sampled_from(["bug", "ui", "docs", "billing", "urgent"]), max_size=4)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.tuples(LABELS, LABELS | st.none()), max_size=12))
def test_it_keeps_f1_between_0_and_1(pairs: list[tuple[list[str], list[str] | None]]) -> None:
    micro, macro = set_f1(pairs)
    assert 0.0 <= micro <= 1.0
    assert 0.0 <= macro <= 1.0


@given(st.lists(LABELS, max_size=12))
def test_it_gives_perfect_predictions_an_f1_of_1(gold: list[list[str]]) -> None:
    assert set_f1([(g, list(reversed(g))) for g in gold]) == (1.0, 1.0)


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=30))
def test_it_gives_the_baseline_the_share_of_the_most_frequent_value(values: list[str]) -> None:
    rows = [({"label": v}, {"label": "a"}) for v in values]
    table = field_table({}, rows)
    top = max(Counter(values).values())
    assert table["label"]["baseline_accuracy"] == pytest.approx(top / len(values))
    assert values.count(mode(FieldRule(), values)) == top
    assert baseline_summary({}, [e for e, _ in rows])["pass_rate"] == pytest.approx(top / len(values))


@given(st.lists(LABELS, min_size=1, max_size=20))
def test_it_takes_the_most_frequent_whole_set_as_a_set_fields_baseline(gold: list[list[str]]) -> None:
    rule = FieldRule("set")
    top = max(Counter(frozenset(g) for g in gold).values())
    assert sum(values_match(rule, g, mode(rule, gold)) for g in gold) == top


@given(st.sampled_from(COMPARES), JSON)
def test_it_finds_every_value_the_same_as_itself(compare: str, value: Any) -> None:
    assert values_match(FieldRule(compare), value, value)


@given(
    st.sampled_from(COMPARES),
    st.lists(st.sampled_from([1, 1.0, True, "A b", "a  B.", ["x", "y"], ["y", "x"]]), max_size=10),
)
def test_it_groups_values_that_are_the_same_and_only_those(compare: str, values: list[Any]) -> None:
    rule = FieldRule(compare, 0.0)
    groups = group(rule, values)
    assert sorted(i for g in groups for i in g) == list(range(len(values)))
    assert all(values_match(rule, values[g[0]], values[i]) for g in groups for i in g)
    firsts = [values[g[0]] for g in groups]
    assert not any(values_match(rule, a, b) for i, a in enumerate(firsts) for b in firsts[i + 1 :])


@given(st.dictionaries(st.text(max_size=3), st.booleans(), max_size=6), st.booleans())
def test_it_keeps_a_case_score_between_0_and_1(matches: dict[str, bool], passed: bool) -> None:
    assert 0.0 <= case_score(matches, passed) <= 1.0


# -- the report, on a small pack written here --------------------------------------------------

CASES = [
    (
        "c1",
        {"category": "billing", "labels": ["refund", "urgent"]},
        {"category": "billing", "labels": ["urgent", "refund"]},
    ),
    ("c2", {"category": "billing", "labels": ["refund"]}, {"category": "technical", "labels": ["refund"]}),
    ("c3", {"category": "technical", "labels": ["bug"]}, {"category": "technical", "labels": ["bug", "urgent"]}),
    ("c4", {"category": "billing", "labels": ["refund"]}, {"category": "billing", "labels": ["refund"]}),
]


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    """One node writes a category (exact) and labels (set); the scripted model gets
    c1 right (labels in another order), c2's category wrong, c3's labels wrong, c4 right."""
    return write_pack(
        tmp_path / "p",
        manifest={"fields": {"labels": {"compare": "set"}}},
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category", "labels"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        script={"cases": {cid: {"classify": answer} for cid, _, answer in CASES}},
        cases=[{"id": cid, "input": {"ticket": cid}, "expected": gold} for cid, gold, _ in CASES],
    )


def test_it_reports_partial_credit_per_field_accuracy_f1_and_the_trivial_baseline(labelled: Path) -> None:
    pack = load_pack(labelled)
    assert pack.model is not None
    doc = evaluate(pack, open_backend(pack.model, base_dir=pack.root), concurrency=1).to_dict()
    assert (doc["passed"], doc["total"]) == (2, 4)
    assert [c["score"] for c in doc["cases"]] == [1.0, 0.5, 0.5, 1.0]
    assert doc["mean_score"] == 0.75
    category, labels = doc["fields"]["category"], doc["fields"]["labels"]
    assert category == {"compare": "exact", "cases": 4, "accuracy": 0.75, "baseline_accuracy": 0.75}
    assert (labels["compare"], labels["accuracy"], labels["baseline_accuracy"]) == ("set", 0.75, 0.5)
    # model: TP 5 (refund x3, urgent, bug), FP 1 (urgent on c3); per label refund 1, urgent 2/3, bug 1
    assert (labels["f1_micro"], labels["f1_macro"]) == pytest.approx((10 / 11, (1 + 2 / 3 + 1) / 3))
    # always ["refund"]: TP 3, FP 1 (c3), FN 2 (urgent on c1, bug on c3); refund 6/7, urgent 0, bug 0
    assert (labels["baseline_f1_micro"], labels["baseline_f1_macro"]) == pytest.approx((6 / 9, 6 / 7 / 3))
    assert doc["baseline"] == {
        "values": {"category": "billing", "labels": ["refund"]},
        "pass_rate": 0.5,  # c2 and c4 expect exactly the modes
        "mean_score": 0.625,  # c1 0.5, c2 1, c3 0, c4 1
    }


def test_it_prints_the_baseline_beside_every_score(labelled: Path) -> None:
    out = pf("eval", str(labelled))
    assert out.returncode == 1, out.stderr  # two cases failed
    lines = out.stdout.splitlines()
    assert "  pass 2/4 (50%; trivial baseline 50%), mean score 0.75 (trivial baseline 0.62)" in lines
    header = next(line for line in lines if line.strip().startswith("field"))
    assert header.split()[:4] == ["field", "compare", "accuracy", "baseline"]
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 : lines.index(header) + 3]}
    assert rows["category"] == ["category", "exact", "75%", "75%"]
    assert rows["labels"] == ["labels", "set", "75%", "50%", "0.91/0.89", "(0.67/0.29)"]
    assert any("tiers: auto 4 (accuracy 50.0%; trivial baseline 50%)" in line for line in lines)


def test_it_writes_the_gate_beside_the_trivial_baseline_in_json(labelled: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    assert pf("eval", str(labelled), "--write-baseline", str(base)).returncode == 1
    doc = json.loads(pf("eval", str(labelled), "--json", "--baseline", str(base)).stdout)
    assert doc["gate"]["ok"] is True
    assert doc["baseline"]["pass_rate"] == 0.5
