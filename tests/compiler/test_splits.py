"""Train / validation / test splits (compiler/splits.py): by tags, seeded and
stratified, cases with the same input kept together, labels train never shows reported."""

from __future__ import annotations

from pathlib import Path

from compiler import load_spec
from compiler.splits import split_gold
from tests.support.tickets import gold_cases, write_spec


def test_it_splits_by_the_tags_the_spec_names(tmp_path: Path) -> None:
    cases = gold_cases(12)
    for i, case in enumerate(cases):
        case["tags"] = ["tr"] if i < 6 else (["va"] if i < 9 else ["te"])
    write_spec(tmp_path / "spec", cases, extra="train: tr\nvalidation: va\ntest: te\n")
    split = split_gold(load_spec(tmp_path / "spec"))
    assert split.method == "tags"
    assert (len(split.train), len(split.validation), len(split.test)) == (6, 3, 3)
    assert split.test == ("c009", "c010", "c011")


def test_with_only_a_train_tag_the_rest_is_halved_into_validation_and_test(tmp_path: Path) -> None:
    cases = gold_cases(10)
    for case in cases[:4]:
        case["tags"] = ["train"]
    write_spec(tmp_path / "spec", cases, extra="train: train\n")
    split = split_gold(load_spec(tmp_path / "spec"))
    assert split.train == ("c000", "c001", "c002", "c003")
    assert (len(split.validation), len(split.test)) == (3, 3)


def test_it_reports_the_labels_train_never_shows(tmp_path: Path) -> None:
    cases = gold_cases(12)
    for i, case in enumerate(cases):
        case["tags"] = ["train"] if i < 6 else []
        case["expected"]["topic"] = "billing" if i < 6 else "account"
    write_spec(tmp_path / "spec", cases, extra="train: train\n")
    split = split_gold(load_spec(tmp_path / "spec"))
    assert split.unseen_labels == {"topic": ["account"]}
    assert "labels train never shows: topic: account" in split.summary()


def test_the_seeded_split_keeps_cases_with_the_same_input_together_and_depends_on_the_seed(tmp_path: Path) -> None:
    cases = gold_cases(40)
    twin = dict(cases[0], id="twin")
    write_spec(tmp_path / "spec", [*cases, twin])
    spec = load_spec(tmp_path / "spec")
    split = split_gold(spec)
    home = next(name for name in ("train", "validation", "test") if "c000" in split.ids(name))  # type: ignore[arg-type]
    assert "twin" in split.ids(home)  # type: ignore[arg-type]
    write_spec(tmp_path / "seeded", cases, extra="split: {seed: 7, validation: 0.25, test: 0.25}\n")
    other = split_gold(load_spec(tmp_path / "seeded"))
    assert other.seed == 7 and other == split_gold(load_spec(tmp_path / "seeded"))
    assert sorted(other.test) != sorted(split.test) or sorted(other.validation) != sorted(split.validation)
