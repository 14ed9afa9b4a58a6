"""A compile whose spec compares an output with a host scorer (docs/compiler.md, "Host
scorers"): the spec declares `compare: scorer:NAME` with `options` and `pass`, the
emitted manifest carries that rule, and every comparison of the compile (the offline
check, the attempt's validation score, the search, the baseline, the verdict) goes
through the host's function, so answers that only the scorer accepts pass. The target is
a `fake:` script (tests/support/scorer_specs.py); the planner replays a recorded plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from compiler import CompilerError, SpecInvalid, load_spec
from compiler.cli import main as cli_main
from compiler.emit import emit
from compiler.induce import induce
from compiler.loop import build
from compiler.plan import parse_plan
from compiler.planners import make_planner
from runtime import load_pack, load_scorers
from tests.support.scorer_specs import (
    SCORER_RULE,
    SCORER_YAML,
    SCORERS_REF,
    careless,
    gold_cases,
    plan_document,
    write_plan,
    write_spec,
    write_target,
)

REGISTRY = load_scorers(SCORERS_REF)


def fields_of(pack_dir: Path) -> Any:
    return yaml.safe_load((pack_dir / "manifest.yaml").read_text())["fields"]


def compile_items(tmp_path: Path, compare: str = SCORER_YAML, **kw: Any) -> Any:
    cases = gold_cases()
    spec = load_spec(write_spec(tmp_path / "spec", cases, compare), scorers=kw.get("scorers"))
    return build(
        spec,
        make_planner(f"recorded:{write_plan(tmp_path / 'plan.json')}"),
        tmp_path / "out.build",
        out=tmp_path / "out",
        target=write_target(tmp_path / "target.json", cases),
        concurrency=2,
        **kw,
    )


def test_answers_only_the_scorer_accepts_pass_and_the_manifest_carries_the_rule(tmp_path: Path) -> None:
    result = compile_items(tmp_path, scorers=REGISTRY)

    attempt = result.attempts[0]
    assert (attempt.status, attempt.offline_score, attempt.target_score) == ("ok", 1.0, 1.0), attempt.problems
    verdict = result.verdict.document
    assert verdict["chosen"] == "pack" and result.verdict.exit_code == 0, verdict["sentence"]
    pack = verdict["arms"]["pack"]
    assert pack["validation"]["passed"] == pack["validation"]["total"] > 0
    assert pack["test"]["passed"] == pack["test"]["total"] > 0
    assert verdict["arms"]["baseline"]["validation"]["passed"] == 0
    # the rule as the runtime reads it, in the attempt's pack and the judged one: the spec's
    # scorer outranks the recorded plan's own `fields: {line_items: {compare: exact}}`
    assert fields_of(tmp_path / "out.build" / "attempts" / "1" / "pack") == {"line_items": SCORER_RULE}
    assert fields_of(tmp_path / "out") == {"line_items": SCORER_RULE}
    rule = load_pack(tmp_path / "out", scorers=REGISTRY).fields["line_items"]
    assert (rule.scorer, dict(rule.options), rule.pass_at) == ("line_items", {"amount_tolerance": 0.01}, 0.9)
    assert rule.function is REGISTRY["line_items"]


def test_the_same_answers_fail_every_case_compared_exact(tmp_path: Path) -> None:
    cases = gold_cases()
    assert all(careless(c["expected"]["line_items"]) != c["expected"]["line_items"] for c in cases)

    result = compile_items(tmp_path, compare="")

    verdict = result.verdict.document
    assert result.attempts[0].target_score == 0.0
    assert verdict["arms"]["pack"]["validation"]["passed"] == 0 and verdict["chosen"] is None
    assert fields_of(tmp_path / "out.build" / "attempts" / "1" / "pack") == {"line_items": {"compare": "exact"}}


def test_a_build_without_the_hosts_scorer_is_refused_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(CompilerError, match=r"outputs\.line_items \(scorer:line_items\).*--scorers"):
        compile_items(tmp_path)
    assert not (tmp_path / "out.build").exists()
    with pytest.raises(CompilerError, match="unknown scorer 'line_items'; the host registers: other"):
        build(
            load_spec(tmp_path / "spec"),
            make_planner("rules"),
            tmp_path / "again.build",
            scorers={"other": lambda expected, actual: 1.0},
        )


def test_emit_writes_a_scorer_rule_without_options_with_its_default_pass(tmp_path: Path) -> None:
    cases = gold_cases()
    spec = load_spec(write_spec(tmp_path / "spec", cases, "    compare: scorer:line_items\n"))
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs))
    pack_dir = emit(parse_plan(plan_document(), spec), spec, tmp_path / "pack", induction=induction)
    assert fields_of(pack_dir) == {"line_items": {"compare": "scorer:line_items", "pass": 1.0}}


def spec_problems(tmp_path: Path, compare: str, scorers: Any = None) -> list[tuple[str, int | None, str]]:
    write_spec(tmp_path / "spec", gold_cases(4), compare)
    with pytest.raises(SpecInvalid) as caught:
        load_spec(tmp_path / "spec", scorers=scorers)
    return [(i.file, i.line, i.message) for i in caught.value.issues]


@pytest.mark.parametrize(
    ("compare", "line", "message"),
    [
        (
            "    compare: scorer:line_items\n    options: [amount_tolerance]\n",
            10,
            "outputs.line_items.options must be a mapping of option name to value",
        ),
        ("    compare: scorer:line_items\n    pass: 1.5\n", 10, "outputs.line_items.pass must be a score from 0 to 1"),
        ("    compare: scorer:line_items\n    pass: yes\n", 10, "outputs.line_items.pass must be a score from 0 to 1"),
        ("    compare: 'scorer:'\n", 9, "outputs.line_items.compare: 'scorer:' needs the scorer's name"),
        ("    compare: text\n    pass: 0.5\n", 10, "outputs.line_items.pass applies to compare: scorer:NAME only"),
        ("    options: {amount_tolerance: 1}\n", 9, "outputs.line_items.options applies to compare: scorer:NAME only"),
        ("    compare: fuzzy\n", 9, "use one of: exact, loose, set, number, text, or scorer:NAME"),
        (
            "    compare: scorer:line_items\n    tolerance: 0.1\n",
            10,
            "outputs.line_items.tolerance applies to compare: number only",
        ),
    ],
)
def test_a_bad_scorer_rule_is_an_issue_at_its_line(tmp_path: Path, compare: str, line: int, message: str) -> None:
    problems = spec_problems(tmp_path, compare)
    assert len(problems) == 1 and problems[0][:2] == ("spec.yaml", line), problems
    assert message in problems[0][2]


def test_a_scorer_name_is_checked_against_the_registry_given(tmp_path: Path) -> None:
    compare = "    compare: scorer:line_itemz\n"
    problems = spec_problems(tmp_path, compare, scorers=REGISTRY)
    assert problems == [
        (
            "spec.yaml",
            9,
            "outputs.line_items.compare: unknown scorer 'line_itemz'; the host registers: line_items",
        )
    ]
    unchecked = load_spec(tmp_path / "spec")  # no registry: the name is not checked, nothing is bound
    assert unchecked.scorers() == {"line_items": "line_itemz"}
    assert unchecked.outputs["line_items"].compare is not None
    assert unchecked.outputs["line_items"].compare.function is None
    bound = load_spec(write_spec(tmp_path / "bound", gold_cases(4)), scorers=REGISTRY).outputs["line_items"].compare
    assert bound is not None and bound.function is REGISTRY["line_items"] and bound.pass_at == 0.9


def test_an_input_takes_no_scorer(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec", gold_cases(4))
    text = (tmp_path / "spec" / "spec.yaml").read_text()
    (tmp_path / "spec" / "spec.yaml").write_text(
        text.replace(
            "inputs:\n  invoice: {description: The invoice's text., type: string}\n", "inputs:\n  invoice:\n"
        ).replace("inputs:\n  invoice:\n", "inputs:\n  invoice:\n    description: The text.\n    pass: 0.5\n", 1)
    )
    with pytest.raises(SpecInvalid, match=r"inputs\.invoice\.pass: inputs are not compared"):
        load_spec(tmp_path / "spec")


# -- the CLI: packforge build / check --scorers ----------------------------------------------------


def build_args(tmp_path: Path, *extra: str) -> list[str]:
    cases = gold_cases()
    spec_dir = tmp_path / "spec"
    if not spec_dir.exists():
        write_spec(spec_dir, cases)
    plan = write_plan(tmp_path / "plan.json")
    target = write_target(tmp_path / "target.json", cases)
    out = tmp_path / "out"
    return ["build", str(spec_dir), "-o", str(out), "--planner", f"recorded:{plan}", "--target", target, *extra]


def test_build_with_scorers_compiles_the_pack_that_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main([*build_args(tmp_path, "--scorers", SCORERS_REF, "--json")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"]["chosen"] == "pack"
    assert result["attempts"][0]["target_score"] == 1.0
    assert fields_of(tmp_path / "out") == {"line_items": SCORER_RULE}


def test_build_without_scorers_exits_2_naming_the_field_and_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(build_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "error: the spec compares outputs.line_items (scorer:line_items) with a host scorer" in err
    assert "--scorers MODULE:SCORERS" in err
    assert not (tmp_path / "out").exists()


def test_build_and_check_with_a_registry_that_lacks_the_scorer_exit_2_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other_scorers.py"
    other.write_text("def near(expected, actual):\n    return 1.0\n\n\nSCORERS = {'near': near}\n")
    assert cli_main(build_args(tmp_path, "--scorers", f"{other}:SCORERS")) == 2
    err = capsys.readouterr().err
    assert "spec.yaml:9" in err and "outputs.line_items.compare: unknown scorer 'line_items'" in err
    assert "the host registers: near" in err
    assert cli_main(["check", str(tmp_path / "spec"), "--scorers", f"{other}:SCORERS"]) == 2
    assert "unknown scorer 'line_items'" in capsys.readouterr().err
    assert cli_main(["check", str(tmp_path / "spec"), "--scorers", SCORERS_REF]) == 0
    assert cli_main(["check", str(tmp_path / "spec")]) == 0  # without a registry, names are not checked
    assert cli_main(["check", str(tmp_path / "spec"), "--scorers", f"{tmp_path / 'none.py'}:SCORERS"]) == 2
    assert "scorer registry" in capsys.readouterr().err
