"""The one-call arm is verified as the planned pack is (docs/compiler.md, "The one-call
arm"): its node asserts the spec's expression rules, and an answer that breaks one goes
to the spec's unsure end. On the routing benchmark spec that is the flat routing pack's
check: a sub-issue of another department is held, every gold pair passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from compiler import induce, load_spec
from compiler.emit import emit
from compiler.one_call import END, NODE, one_call_plan, outputs_only, rules_check
from runtime import load_pack

ROOT = Path(__file__).resolve().parents[2]


def test_the_one_call_node_asserts_the_specs_rules_and_fails_to_the_unsure_end(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "benchmarks" / "specs" / "helpdesk_routing")
    plan = one_call_plan(spec)
    assert plan is not None and spec.rules[0].expr is not None and spec.unsure_end == "review"
    node = next(n for n in plan.nodes if n.id == NODE)
    assert node.assert_ == " ".join(spec.rules[0].expr.split())
    assert {(e.source, e.target, e.on_fail) for e in plan.edges} >= {(NODE, END, None)}
    assert any(e.source == NODE and e.on_fail == "review" for e in plan.edges)
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    out = emit(plan, spec, tmp_path / "pack", induction=induction, evalset=outputs_only(spec))
    graph = yaml.safe_load((out / "graph.yaml").read_text())
    assert graph["nodes"]["review"]["kind"] == "end"
    check = load_pack(out).nodes[NODE].check
    assert check is not None
    for case in spec.gold:  # gold satisfies the rule: the check holds back no expected answer
        assert check.truthy({**case.expected, "input": case.input}), case.id
    assert not check.truthy({"department": "billing", "subissue": "app_crash", "input": {"message": "x"}})


def test_a_spec_without_expression_rules_gets_the_plain_one_call(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "benchmarks" / "specs" / "review_aspects")
    assert not any(rule.expr for rule in spec.rules)
    plan = one_call_plan(spec)
    assert plan is not None
    assert next(n for n in plan.nodes if n.id == NODE).assert_ is None
    assert [(e.source, e.target) for e in plan.edges] == [(NODE, END)]


def test_a_rule_some_gold_case_leaves_unscored_is_not_checked() -> None:
    """moderation's gold cases at its unsure end leave fields its rules read unset: on
    one node writing every output, the rule would hold answers gold never scored."""
    spec = load_spec(ROOT / "specs" / "moderation")
    assert any(rule.expr for rule in spec.rules)
    assert rules_check(spec) is None
    plan = one_call_plan(spec)
    assert plan is not None and next(n for n in plan.nodes if n.id == NODE).assert_ is None


@pytest.mark.parametrize(("unsure_end", "fails_to"), [(None, None), (END, END), (NODE, None), ("review", "review")])
def test_the_check_routes_to_the_unsure_end_whatever_it_is_named(
    tmp_path: Path, unsure_end: str | None, fails_to: str | None
) -> None:
    spec = dataclasses.replace(load_spec(ROOT / "benchmarks" / "specs" / "helpdesk_routing"), unsure_end=unsure_end)
    plan = one_call_plan(spec)
    assert plan is not None
    assert next(n for n in plan.nodes if n.id == NODE).assert_ is not None
    assert [e.on_fail for e in plan.edges if e.on_fail] == ([fails_to] if fails_to else [])
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    pack = load_pack(emit(plan, spec, tmp_path / "pack", induction=induction, evalset=outputs_only(spec)))
    assert pack.nodes[NODE].check is not None
