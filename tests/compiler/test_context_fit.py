"""Fitting the target's context (compiler/context_fit.py): inputs too long for the target
even with every example cut get a truncation rule in the judged pack, measured on the
cases that fit, and the overflowing cases are run again under it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from compiler import load_spec
from compiler.context_fit import fit_rule
from compiler.loop import build
from compiler.planners import make_planner
from compiler.report import verdict_table
from compiler.trials import CaseOutcome
from runtime import load_pack
from tests.support.fault_server import FaultServer
from tests.support.tickets import Target, gold_cases, write_spec

CONTEXT = 2500  # characters the loopback target takes in one request
LONG = {3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47}  # tickets padded past the context


def outcome(case_id: str, overflow: bool) -> CaseOutcome:
    return CaseOutcome(
        id=case_id,
        passed=not overflow,
        score=float(not overflow),
        fields={},
        confidence=None,
        eligible=True,
        calls=1,
        tokens=10,
        overflow=overflow,
    )


def test_the_rule_cuts_the_longest_field_to_the_longest_value_that_fit(tmp_path: Path) -> None:
    cases = gold_cases(6)
    cases[1]["input"]["message"] += " pad" * 500
    cases[2]["input"]["message"] += " pad" * 20
    write_spec(tmp_path / "spec", cases)
    spec = load_spec(tmp_path / "spec")
    rule = fit_rule(spec, [outcome(c["id"], c["id"] == "c001") for c in cases])
    assert rule is not None and rule.field == "message"
    assert rule.max_chars == len(cases[2]["input"]["message"])  # the longest message that fit
    assert "message" in rule.sentence() and str(rule.max_chars) in rule.sentence()
    assert fit_rule(spec, [outcome(c["id"], False) for c in cases]) is None


def test_a_judged_pack_whose_inputs_overflow_gets_a_truncation_rule_that_makes_them_fit(tmp_path: Path) -> None:
    cases = gold_cases(48)
    for c in cases:
        if int(c["id"][1:]) in LONG:
            c["input"]["message"] += " and more" * 400
    write_spec(tmp_path / "spec", cases)
    with FaultServer(answer=Target(cases, lambda body: True), logprobs=False, context_chars=CONTEXT) as server:
        result = build(
            load_spec(tmp_path / "spec"),
            make_planner("rules"),
            tmp_path / "b",
            out=tmp_path / "out",
            target=server.spec(),
            budget=600,
        )
    assert result.verdict is not None
    context = result.verdict.document["context"]
    assert context["overflow_cases"] > 0  # during the search, long tickets did not fit
    assert context["truncated_cases"] == context["overflow_cases"]
    assert context["overflow_after_rule"] == 0 and context["passed_after_rule"] == context["truncated_cases"]
    assert context["rule"]["field"] == "message" and context["rule"]["keep"] == "head"
    manifest = yaml.safe_load((tmp_path / "out" / "manifest.yaml").read_text())
    assert manifest["truncate"] == {"message": {"max_chars": context["rule"]["max_chars"], "keep": "head"}}
    pack = load_pack(tmp_path / "out")
    assert pack.truncate["message"].max_chars < min(
        len(c["input"]["message"]) for c in cases if int(c["id"][1:]) in LONG
    )
    assert json.loads((tmp_path / "b" / "verdict.json").read_text())["context"] == context
    table = verdict_table(result.verdict)
    assert f"context: input.message is cut to its first {context['rule']['max_chars']} characters" in table
    assert f"{context['truncated_cases']} cases cut, 0 still overflow" in table
