"""Host-registered scorers (runtime.scorers; `compare: scorer:NAME`): the host's function
decides a field's match, with the field's options and `pass`; its reason reaches the
case's diff; a name the host does not register is refused at load; a scorer that raises
is that case's error, not the eval's crash; the CLI takes --scorers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime import load_pack, open_backend
from runtime.errors import PackInvalid
from runtime.evaluate import evaluate
from runtime.scorers import load_scorers
from tests.support.runtime_packs import REPO, pf, write_pack
from tests.support.scorers import EXAMPLE, ITEMS_SCHEMA, WANT


def items_pack(tmp_path: Path, answer: list[dict[str, Any]], **rule: Any) -> Path:
    return write_pack(
        tmp_path / "p",
        manifest={"fields": {"items": {"compare": "scorer:line_items", **rule}}},
        nodes={"read": {"kind": "generate", "reads": ["input.text"], "writes": ["items"]}, "done": {"kind": "end"}},
        edges=[{"from": "read", "to": "done"}],
        grammars={"read": ITEMS_SCHEMA},
        script={"nodes": {"read": {"items": answer}}},
        cases=[{"id": "c1", "input": {"text": "an invoice"}, "expected": {"items": WANT}}],
    )


def report_for(root: Path, scorers: Any) -> Any:
    pack = load_pack(root, scorers=scorers)
    return evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), concurrency=1)


def test_the_hosts_scorer_decides_the_match_and_its_reason_reaches_the_diff(tmp_path: Path) -> None:
    misread = [WANT[0], {"description": "PAPER.", "quantity": 4, "amount": 9.0}]  # the amount is off by 0.5
    (case,) = report_for(items_pack(tmp_path, misread), load_scorers(EXAMPLE)).cases
    assert not case.passed
    (diff,) = case.diffs
    assert diff.field == "items" and diff.score == 0.5
    assert diff.reason == "1 of 2 line items match; not found: 'Paper'; 1 answered item matches none"


def test_options_and_pass_are_the_fields_own(tmp_path: Path) -> None:
    misread = [WANT[0], {"description": "paper", "quantity": 4, "amount": 9.0}]
    loose = items_pack(tmp_path / "a", misread, options={"amount_tolerance": 1.0})
    assert report_for(loose, load_scorers(EXAMPLE)).cases[0].passed  # within the field's tolerance
    half = items_pack(tmp_path / "b", misread, **{"pass": 0.5})
    assert report_for(half, load_scorers(EXAMPLE)).cases[0].passed  # half the items is a pass here


def test_a_scorer_name_the_host_does_not_register_is_refused_at_load(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"fields": {"items": {"compare": "scorer:line_itemz"}}},
        nodes={"read": {"kind": "generate", "reads": ["input.text"], "writes": ["items"]}, "done": {"kind": "end"}},
        edges=[{"from": "read", "to": "done"}],
        script={"nodes": {"read": {"items": []}}},
    )
    with pytest.raises(PackInvalid, match=r"fields.items: unknown scorer 'line_itemz'; the host registers: line_items"):
        load_pack(root, scorers=load_scorers(EXAMPLE))


def test_a_scorer_that_raises_is_the_cases_error_not_a_crash(tmp_path: Path) -> None:
    def broken(expected: Any, actual: Any) -> float:
        raise KeyError("description")

    (case,) = report_for(items_pack(tmp_path, WANT), {"line_items": broken}).cases
    assert not case.passed and case.diffs == [] and case.score == 0.0  # no credit for a field not scored
    (problem,) = case.problems
    assert problem.kind == "scorer"
    assert problem.message == "fields.items: scorer 'line_items' raised KeyError: 'description'"


@pytest.mark.parametrize("returned", [1.5, "yes", None])
def test_a_scorer_must_return_a_score_from_0_to_1(tmp_path: Path, returned: Any) -> None:
    (case,) = report_for(items_pack(tmp_path, WANT), {"line_items": lambda e, a: returned}).cases
    assert case.problems[0].kind == "scorer" and "not a score from 0 to 1" in case.problems[0].message


def test_the_cli_takes_scorers_and_asks_for_them_when_a_pack_needs_them(tmp_path: Path) -> None:
    root = items_pack(tmp_path, WANT)
    done = pf("eval", str(root), "--scorers", EXAMPLE, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["passed"] == 1
    missing = pf("eval", str(root))
    assert missing.returncode == 2
    assert (
        "the pack compares items (scorer:line_items) with host scorers: give --scorers MODULE:SCORERS" in missing.stderr
    )


def test_the_example_pack_passes_its_evalset_with_the_example_scorer(tmp_path: Path) -> None:
    root = tmp_path / "invoice_extract"
    shutil.copytree(REPO / "packs" / "invoice_extract", root)
    manifest = yaml.safe_load((root / "manifest.yaml").read_text())
    manifest["fields"]["line_items"] = {"compare": "scorer:line_items", "options": {"amount_tolerance": 0.005}}
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    plain = report_for(REPO / "packs" / "invoice_extract", None)
    scored = report_for(root, load_scorers(EXAMPLE))
    assert [c.passed for c in scored.cases] == [c.passed for c in plain.cases] and scored.passed > 0
