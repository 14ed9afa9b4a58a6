"""Blame that follows provenance through deterministic nodes, committed values of runs
that stopped early, and repeated runs of every case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import evaluate, load_pack, open_backend
from tests.support.runtime_packs import write_pack


def normalise(label: str) -> dict[str, Any]:
    return {"category": label.strip().lower()}


def to_queue(category: str) -> dict[str, Any]:
    return {"queue": {"billing": "money", "technical": "eng"}.get(category, "inbox")}


def to_team(queue: str) -> dict[str, Any]:
    return {"team": f"team-{queue}"}


def with_tax(amount: float) -> dict[str, Any]:
    return {"total": amount * 2}  # a bug: the rate is 1.2


TOOLS = {"normalise": normalise, "to_queue": to_queue, "to_team": to_team, "with_tax": with_tax}


def tool_node(tool: str, reads: dict[str, str], writes: str) -> dict[str, Any]:
    return {"kind": "tool", "tool": tool, "reads": list(reads.values()), "args": reads, "writes": [writes]}


def chain_pack(tmp_path: Path, answers: dict[str, Any], cases: list[dict[str, Any]]) -> Any:
    """classify (model) -> normalise (tool, rewrites category in place) -> to_queue (tool)
    -> to_team (tool) -> done."""
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["normalise", "to_queue", "to_team"]},
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "normalise": tool_node("normalise", {"label": "category"}, "category"),
            "to_queue": tool_node("to_queue", {"category": "category"}, "queue"),
            "to_team": tool_node("to_team", {"queue": "queue"}, "team"),
            "done": {"kind": "end"},
        },
        edges=[
            {"from": "classify", "to": "normalise"},
            {"from": "normalise", "to": "to_queue"},
            {"from": "to_queue", "to": "to_team"},
            {"from": "to_team", "to": "done"},
        ],
        script={"cases": answers},
        cases=cases,
    )
    return load_pack(root, tools=set(TOOLS))


def run_eval(pack: Any, **kwargs: Any) -> Any:
    return evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), tools=TOOLS, **kwargs)


def test_it_blames_the_model_node_whose_value_a_tool_normalised(tmp_path: Path) -> None:
    pack = chain_pack(
        tmp_path,
        {"right": {"classify": {"category": " Billing"}}, "wrong": {"classify": {"category": "Technical "}}},
        [
            {"id": "right", "input": {"ticket": "refund"}, "expected": {"category": "billing"}},
            {"id": "wrong", "input": {"ticket": "refund"}, "expected": {"category": "billing"}},
        ],
    )
    report = run_eval(pack)
    right, wrong = report.cases
    assert right.passed  # the tool's normalising made the model's " Billing" right
    assert not wrong.passed and [d.field for d in wrong.diffs] == ["category"]
    assert [s.node for s in wrong.trace.commits() if "category" in s.writes] == ["classify", "normalise"]
    assert wrong.blamed == "classify"


def test_it_follows_provenance_through_fields_the_evalset_does_not_name(tmp_path: Path) -> None:
    pack = chain_pack(
        tmp_path,
        {"c": {"classify": {"category": "technical"}}},
        [{"id": "c", "input": {"ticket": "refund"}, "expected": {"team": "team-money"}}],
    )
    [case] = run_eval(pack).cases
    assert [(d.field, d.actual) for d in case.diffs] == [("team", "team-eng")]
    assert case.blamed == "classify"  # to_team <- queue (to_queue) <- category (normalise) <- classify


def test_it_blames_a_tool_that_computed_a_wrong_value_from_right_inputs(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["with_tax"]},
        nodes={
            "extract": {"kind": "generate", "reads": ["input.invoice"], "writes": ["amount"]},
            "tax": tool_node("with_tax", {"amount": "amount"}, "total"),
            "done": {"kind": "end"},
        },
        edges=[{"from": "extract", "to": "tax"}, {"from": "tax", "to": "done"}],
        script={"nodes": {"extract": {"amount": 40}}},
        cases=[{"id": "inv", "input": {"invoice": "40 USD"}, "expected": {"amount": 40, "total": 48.0}}],
    )
    pack = load_pack(root, tools={"with_tax"})
    [case] = run_eval(pack).cases
    assert [(d.field, d.actual) for d in case.diffs] == [("total", 80)]
    assert case.blamed == "tax"


def test_it_judges_a_tools_inputs_by_the_fields_rules(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["with_tax"], "fields": {"amount": {"compare": "number", "tolerance": 0.01}}},
        nodes={
            "extract": {"kind": "generate", "reads": ["input.invoice"], "writes": ["amount"]},
            "tax": tool_node("with_tax", {"amount": "amount"}, "total"),
            "done": {"kind": "end"},
        },
        edges=[{"from": "extract", "to": "tax"}, {"from": "tax", "to": "done"}],
        script={"nodes": {"extract": {"amount": 40.004}}},
        cases=[{"id": "inv", "input": {"invoice": "40 USD"}, "expected": {"amount": 40, "total": 48.0}}],
    )
    [case] = run_eval(load_pack(root, tools={"with_tax"})).cases
    # 40.004 is 40 by the amount's rule, so the tool computed a wrong total from a right input.
    assert [d.field for d in case.diffs] == ["total"] and case.blamed == "tax"


def test_it_blames_the_upstream_writer_when_a_tool_read_a_wrong_named_field(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["with_tax"]},
        nodes={
            "extract": {"kind": "generate", "reads": ["input.invoice"], "writes": ["amount"]},
            "tax": tool_node("with_tax", {"amount": "amount"}, "total"),
            "done": {"kind": "end"},
        },
        edges=[{"from": "extract", "to": "tax"}, {"from": "tax", "to": "done"}],
        script={"nodes": {"extract": {"amount": 30}}},
        cases=[{"id": "inv", "input": {"invoice": "40 USD"}, "expected": {"total": 48, "amount": 40}}],
    )
    [case] = run_eval(load_pack(root, tools={"with_tax"})).cases
    assert {d.field for d in case.diffs} == {"amount", "total"} and case.blamed == "extract"


def test_it_blames_a_tool_that_no_model_fed(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["with_tax"]},
        nodes={"tax": tool_node("with_tax", {"amount": "input.amount"}, "total"), "done": {"kind": "end"}},
        edges=[{"from": "tax", "to": "done"}],
        script={"nodes": {}},
        cases=[{"id": "inv", "input": {"amount": 40}, "expected": {"total": 48}}],
    )
    [case] = run_eval(load_pack(root, tools={"with_tax"})).cases
    assert case.blamed == "tax"


def human_pack(tmp_path: Path) -> Any:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "review": {"kind": "human", "reads": ["category"], "writes": ["approved"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "review"}, {"from": "review", "to": "done"}],
        grammars={
            "review": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}
        },
        script={"nodes": {"classify": {"category": "billing"}}},
        cases=[
            {"id": "waits", "input": {"ticket": "x"}, "expected": {"category": "billing"}, "end": "review"},
            {"id": "wrong", "input": {"ticket": "x"}, "expected": {"category": "technical"}, "end": "review"},
            {
                "id": "auto",
                "input": {"ticket": "x"},
                "expected": {"category": "billing"},
                "human": {"review": {"approved": True}},
            },
        ],
    )
    return load_pack(root)


def test_it_keeps_the_values_an_escalated_run_committed(tmp_path: Path) -> None:
    report = run_eval(human_pack(tmp_path))
    waits, wrong, answered = report.cases
    assert (waits.status, waits.tier, waits.passed) == ("waiting", "escalated", True)
    assert waits.output == {} and waits.committed == {"category": "billing"}
    assert [(d.field, d.expected, d.actual) for d in wrong.diffs] == [("category", "technical", "billing")]
    assert wrong.committed == {"category": "billing"} and wrong.blamed == "classify"
    doc = report.to_dict()
    assert doc["cases"][0]["committed"] == {"category": "billing"} and doc["cases"][0]["output"] == {}
    assert answered.status == "done" and answered.output == {"approved": True, "category": "billing"}


def test_it_leaves_committed_empty_for_a_run_that_finished_in_the_auto_tier(tmp_path: Path) -> None:
    pack = chain_pack(
        tmp_path,
        {"c": {"classify": {"category": "billing"}}},
        [{"id": "c", "input": {"ticket": "refund"}, "expected": {"team": "team-money"}}],
    )
    [case] = run_eval(pack).cases
    assert case.passed and case.tier == "auto" and case.committed == {}
    assert case.output["team"] == "team-money"


def test_it_runs_every_case_k_times_and_reports_consistency(tmp_path: Path) -> None:
    pack = chain_pack(
        tmp_path,
        {"a": {"classify": {"category": "billing"}}, "b": {"classify": {"category": "other"}}},
        [
            {"id": "a", "input": {"ticket": "refund"}, "expected": {"category": "billing"}},
            {"id": "b", "input": {"ticket": "refund"}, "expected": {"category": "billing"}},
        ],
    )
    report = run_eval(pack, repeats=3)
    assert [(c.case_id, c.repeat) for c in report.cases] == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]
    assert len({c.trace.run_id for c in report.cases}) == 6
    assert report.cases[0].trace.run_id == "eval-a-r1"
    assert (report.passed, report.total) == (3, 6)
    assert report.metrics()["pass_rate"] == 0.5
    consistency = report.consistency()
    assert (consistency["always"], consistency["sometimes"], consistency["never"]) == (1, 0, 1)
    assert consistency["cases"] == {"a": {"runs": 3, "passed": 3}, "b": {"runs": 3, "passed": 0}}
    doc = report.to_dict()
    assert doc["repeats"] == 3 and [c["repeat"] for c in doc["cases"]] == [1, 2, 3, 1, 2, 3]
