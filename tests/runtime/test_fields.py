"""Per-field comparators (`fields:` in the manifest) and voting on chosen fields (`agree_on`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import load_pack, open_backend, run_pack
from runtime.pack.fields import FieldRule, values_match
from tests.support.runtime_packs import issues_of, write_pack

EXACT, LOOSE, SET, TEXT = FieldRule("exact"), FieldRule("loose"), FieldRule("set"), FieldRule("text")


def number(tolerance: float = 0.0) -> FieldRule:
    return FieldRule("number", tolerance)


# -- comparators ---------------------------------------------------------------------------


def test_it_compares_exact_values_with_json_equality() -> None:
    assert values_match(EXACT, "billing", "billing")
    assert values_match(EXACT, {"a": [1, 2]}, {"a": [1, 2]})
    assert not values_match(EXACT, "billing", "Billing")
    assert not values_match(EXACT, ["a", "b"], ["b", "a"])
    assert values_match(EXACT, 2, 2.0)
    assert not values_match(EXACT, [True], [1])  # a boolean is not a number


def test_it_compares_loose_strings_ignoring_case_and_spacing() -> None:
    assert values_match(LOOSE, "ACME  Corp ", "acme corp")
    assert values_match(LOOSE, ["A b", "C"], ["a  B", "c"])
    assert not values_match(LOOSE, "acme corp.", "acme corp")
    assert not values_match(LOOSE, 1, 2)


def test_it_compares_set_fields_ignoring_order_and_repeats() -> None:
    assert values_match(SET, ["bug", "ui"], ["ui", "bug", "ui"])
    assert values_match(SET, [{"k": 1}, {"k": 2}], [{"k": 2}, {"k": 1}])
    assert not values_match(SET, ["bug", "ui"], ["bug"])
    assert not values_match(SET, ["bug"], "bug")  # a non-array is compared exactly
    assert values_match(SET, [], [])


def test_it_compares_numbers_within_the_tolerance() -> None:
    assert values_match(number(0.01), 148.98, 148.99)
    assert not values_match(number(0.01), 148.98, 149.0)
    assert values_match(number(), 0.1 + 0.2, 0.3)  # float rounding is not a difference
    assert values_match(number(), 12.5, "12.50")  # a number read as a string
    assert not values_match(number(), True, 1)  # a boolean is not a number
    assert not values_match(number(0.5), "n/a", 1)


def test_it_compares_text_after_normalising_it() -> None:
    assert values_match(TEXT, "Atelier Lumière, SARL.", "ATELIER   LUMIÈRE SARL")
    assert values_match(TEXT, "ﬁle №5", "file no5")  # NFKC: ligature and compatibility characters
    assert not values_match(TEXT, "Lumière", "Lumiere")  # accents are letters, not punctuation
    assert not values_match(TEXT, "acme", "acme corp")
    # Punctuation becomes a space (docs/pack-format.md): a hyphen splits a word.
    assert values_match(TEXT, "e-mail", "e mail") and not values_match(TEXT, "e-mail", "email")


# -- the loader ------------------------------------------------------------------------------

GEN = {"kind": "generate", "reads": ["input.ticket"], "writes": ["category", "reason"]}


def pack_with(tmp_path: Path, fields: Any = None, node: dict[str, Any] | None = None, **kw: Any) -> Path:
    """classify -> done, and -> unsure (on_unsure) when the node draws samples."""
    node = {**GEN, **(node or {})}
    nodes: dict[str, Any] = {"classify": node, "done": {"kind": "end"}}
    edges: list[dict[str, Any]] = [{"from": "classify", "to": "done"}]
    if node.get("samples", 1) > 1:
        nodes["unsure"] = {"kind": "end"}
        edges.append({"from": "classify", "on_unsure": "unsure"})
    manifest = {"fields": fields} if fields is not None else None
    return write_pack(tmp_path / "p", manifest=manifest, nodes=nodes, edges=edges, **kw)


def manifest_line(root: Path, text: str) -> int:
    lines = (root / "manifest.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


def test_it_loads_field_rules_and_defaults_others_to_exact(tmp_path: Path) -> None:
    root = pack_with(tmp_path, {"category": {"compare": "loose"}, "reason": {"compare": "number", "tolerance": 1}})
    pack = load_pack(root)
    assert pack.fields == {"category": FieldRule("loose"), "reason": FieldRule("number", 1.0)}


def test_it_refuses_an_unknown_compare_naming_the_line(tmp_path: Path) -> None:
    root = pack_with(tmp_path, {"category": {"compare": "fuzzy"}})
    [issue] = issues_of(root)
    assert issue.startswith(f"manifest.yaml:{manifest_line(root, 'compare: fuzzy')}: ")
    assert "unknown compare 'fuzzy'" in issue and "exact, loose, set, number, text" in issue


def test_it_refuses_a_tolerance_on_a_rule_that_is_not_number(tmp_path: Path) -> None:
    root = pack_with(tmp_path, {"category": {"compare": "text", "tolerance": 0.1}})
    [issue] = issues_of(root)
    assert issue.startswith(f"manifest.yaml:{manifest_line(root, 'tolerance')}: ")
    assert "'tolerance' applies to compare: number only" in issue


def test_it_refuses_a_negative_tolerance(tmp_path: Path) -> None:
    root = pack_with(tmp_path, {"category": {"compare": "number", "tolerance": -0.5}})
    [issue] = issues_of(root)
    assert issue.startswith(f"manifest.yaml:{manifest_line(root, 'tolerance')}: ")
    assert "tolerance must be a number >= 0" in issue


def test_it_refuses_an_unknown_rule_key_and_a_field_no_node_writes(tmp_path: Path) -> None:
    root = pack_with(tmp_path, {"category": {"compare": "set", "tolrance": 1}, "categroy": {"compare": "text"}})
    issues = issues_of(root)
    assert any("unknown key 'tolrance'" in i and "did you mean 'tolerance'" in i for i in issues)
    assert any("'categroy' is written by no node (did you mean 'category'?)" in i for i in issues)


def test_it_refuses_a_gold_value_the_rule_cannot_compare(tmp_path: Path) -> None:
    cases = [{"id": "c1", "input": {"ticket": "t"}, "expected": {"category": "billing"}}]
    root = pack_with(tmp_path, {"category": {"compare": "set"}}, cases=cases)
    [issue] = issues_of(root)
    assert issue.startswith("evalset.jsonl:1: ")
    assert "expected.category must be an array" in issue


def test_it_refuses_agree_on_a_field_the_node_does_not_write(tmp_path: Path) -> None:
    root = pack_with(tmp_path, node={"samples": 3, "agree_on": ["category", "priority"]})
    [issue] = issues_of(root)
    assert issue.startswith("graph.yaml:")
    assert "agree_on names 'priority', which the node does not write" in issue


def test_it_refuses_agree_on_without_draws_to_compare(tmp_path: Path) -> None:
    root = pack_with(tmp_path, node={"agree_on": ["category"]})
    [issue] = issues_of(root)
    assert "agree_on needs samples of 2 or more" in issue


# -- voting on chosen fields -------------------------------------------------------------------


def vote(tmp_path: Path, draws: list[dict[str, Any]], fields: Any = None, **node: Any) -> Any:
    root = pack_with(
        tmp_path,
        fields,
        node={"samples": 3, "agree": 2, **node},
        script={"nodes": {"classify": draws}},
    )
    pack = load_pack(root)
    assert pack.model is not None
    return run_pack(pack, {"ticket": "t"}, backend=open_backend(pack.model, base_dir=pack.root))


def test_it_commits_draws_that_differ_only_in_a_field_outside_agree_on(tmp_path: Path) -> None:
    draws = [
        {"category": "billing", "reason": "charged twice"},
        {"category": "other", "reason": "unclear"},
        {"category": "billing", "reason": "a double charge on the card"},
    ]
    result = vote(tmp_path, draws, agree_on=["category"])
    assert result.tier == "auto"
    assert result.state == {"category": "billing", "reason": "charged twice"}  # the first agreeing draw
    assert result.trace.steps[0].attempt == 1


def test_it_needs_every_written_field_to_agree_without_agree_on(tmp_path: Path) -> None:
    draws = [
        {"category": "billing", "reason": "charged twice"},
        {"category": "other", "reason": "unclear"},
        {"category": "billing", "reason": "a double charge on the card"},
    ]
    result = vote(tmp_path, draws)
    assert result.tier == "escalated"
    assert result.state == {}
    assert "draws disagreed (1, 1, 1 of 3; need 2)" in result.trace.steps[0].reason


def test_it_agrees_on_a_set_field_whatever_the_order(tmp_path: Path) -> None:
    draws = [
        {"category": ["bug", "ui"], "reason": "a"},
        {"category": ["ui", "bug"], "reason": "b"},
        {"category": ["docs"], "reason": "c"},
    ]
    result = vote(tmp_path, draws, {"category": {"compare": "set"}}, agree_on=["category"])
    assert result.tier == "auto"
    assert result.state["category"] == ["bug", "ui"]


def test_it_agrees_on_numbers_within_the_tolerance(tmp_path: Path) -> None:
    draws = [{"category": 10.0, "reason": "a"}, {"category": 10.004, "reason": "b"}, {"category": 12, "reason": "c"}]
    result = vote(tmp_path, draws, {"category": {"compare": "number", "tolerance": 0.01}}, agree_on=["category"])
    assert result.tier == "auto"
    assert result.state["category"] == 10.0
