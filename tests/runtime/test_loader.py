"""Strict loading: every error names the file, the line where there is one, and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import PACK_ISSUE_KINDS, PackInvalid, load_pack
from tests.support.runtime_packs import issues_of, write_pack

GEN = {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]}


def test_it_loads_a_valid_pack(triage: Path) -> None:
    pack = load_pack(triage)
    assert pack.entry == "classify"
    assert set(pack.nodes) == {"classify", "priority", "done", "other"}
    assert [c.id for c in pack.cases] == ["b"]
    assert len(pack.digest) == 16


def test_it_names_the_line_of_a_yaml_syntax_error(triage: Path) -> None:
    (triage / "graph.yaml").write_text("nodes:\n  a:\n    kind: [generate\n")
    [issue] = issues_of(triage)
    assert issue.startswith("graph.yaml:")
    assert "YAML syntax error" in issue


def test_it_suggests_the_nearest_key_for_an_unknown_one(triage: Path) -> None:
    (triage / "manifest.yaml").write_text("name: t\nversion: 1\nentry: classify\nentyr: x\n")
    [issue] = issues_of(triage)
    assert issue.startswith("manifest.yaml:4:")
    assert "unknown key 'entyr'" in issue and "did you mean 'entry'" in issue


def test_it_suggests_the_nearest_node_key(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p", nodes={"a": {**GEN, "sampels": 3}, "done": {"kind": "end"}}, edges=[{"from": "a", "to": "done"}]
    )
    [issue] = issues_of(root)
    assert "unknown key 'sampels'" in issue and "did you mean 'samples'" in issue
    assert issue.startswith("graph.yaml:")


def test_it_reports_missing_prompt_and_grammar_files(triage: Path) -> None:
    (triage / "prompts" / "classify.txt").unlink()
    (triage / "grammars" / "priority.json").unlink()
    found = issues_of(triage)
    assert any(i.startswith("prompts/classify.txt: missing file") for i in found)
    assert any(i.startswith("grammars/priority.json: missing file") for i in found)


def test_it_reports_an_invalid_json_schema(triage: Path) -> None:
    (triage / "grammars" / "classify.json").write_text(json.dumps({"type": "object", "properties": {"x": {"type": 7}}}))
    found = issues_of(triage)
    assert any(i.startswith("grammars/classify.json: invalid JSON Schema at properties/x/type") for i in found)


def test_it_names_the_line_of_a_grammar_syntax_error(triage: Path) -> None:
    (triage / "grammars" / "classify.json").write_text('{\n  "type": "object",\n  oops\n}')
    [issue] = issues_of(triage)
    assert issue.startswith("grammars/classify.json:3: JSON syntax error")


def test_it_refuses_an_edge_to_an_unknown_node(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", nodes={"a": GEN, "done": {"kind": "end"}}, edges=[{"from": "a", "to": "doen"}])
    found = issues_of(root)
    assert any("edge to unknown node 'doen' (did you mean 'done'?)" in i for i in found)


def test_it_gives_one_problem_for_one_typo_in_an_edge_target(tmp_path: Path) -> None:
    """The typo cuts off everything after it; only the unknown node is reported, not every
    node past it as unreachable, its source as a dead end, or reads along the lost path."""
    root = write_pack(
        tmp_path / "p",
        nodes={
            "a": GEN,
            "b": {"kind": "generate", "reads": ["category"], "writes": ["x"]},
            "c": {"kind": "generate", "reads": ["x"], "writes": ["y"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "a", "to": "bb"}, {"from": "b", "to": "c"}, {"from": "c", "to": "done"}],
    )
    [issue] = issues_of(root)
    assert "edge to unknown node 'bb' (did you mean 'b'?)" in issue


def test_it_gives_one_problem_for_one_typo_in_an_edge_source(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "b": {"kind": "generate", "reads": ["category"], "writes": ["x"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "b"}, {"from": "bx", "to": "done"}],
    )
    found = issues_of(root)
    assert any("edge from unknown node 'bx' (did you mean 'b'?)" in i for i in found)
    assert not any("unreachable" in i for i in found)


def test_it_still_reports_unreachable_nodes_the_typo_does_not_explain(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "done": {"kind": "end"}, "lost": {"kind": "end"}, "orphan": {**GEN, "writes": ["z"]}},
        edges=[{"from": "a", "to": "done"}, {"from": "orphan", "to": "lsot"}],
    )
    found = issues_of(root)
    assert any("edge to unknown node 'lsot'" in i for i in found)
    assert any("node 'lost' is unreachable" in i for i in found)


def test_it_refuses_a_read_nothing_before_can_have_written(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "b": {"kind": "generate", "reads": ["priority"], "writes": ["x"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "b"}, {"from": "b", "to": "done"}],
    )
    [issue] = issues_of(root)
    assert "node 'b' reads 'priority', which no node before it can have written" in issue
    assert issue.startswith("graph.yaml:")


def test_it_does_not_count_a_failed_nodes_writes_on_its_on_fail_edge(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "fix": {"kind": "generate", "reads": ["category"], "writes": ["x"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}, {"from": "a", "on_fail": "fix"}, {"from": "fix", "to": "done"}],
    )
    [issue] = issues_of(root)
    assert "node 'fix' reads 'category'" in issue


def test_it_refuses_an_unreachable_node(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "done": {"kind": "end"}, "lost": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}],
    )
    [issue] = issues_of(root)
    assert "node 'lost' is unreachable from entry 'a'" in issue


def test_it_refuses_a_cycle_with_no_way_out(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "b": {"kind": "generate", "reads": ["category"], "writes": ["x"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "b"}, {"from": "b", "to": "a"}, {"from": "b", "on_fail": "done"}],
    )
    found = issues_of(root)
    assert any("cycle a -> b -> a has no way out" in i for i in found)


def test_it_accepts_a_cycle_with_a_guarded_exit(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "b": {"kind": "generate", "reads": ["category"], "writes": ["x"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "b"}, {"from": "b", "to": "done", "when": "x == 1"}, {"from": "b", "to": "a"}],
    )
    assert load_pack(root).entry == "a"


def test_it_refuses_a_tool_the_host_did_not_register(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["lookup"]},
        nodes={"t": {"kind": "tool", "tool": "lookup", "writes": ["r"]}, "done": {"kind": "end"}},
        edges=[{"from": "t", "to": "done"}],
    )
    [issue] = issues_of(root, tools={"send_email"})
    assert "tool 'lookup' is not registered by the host (registered: send_email)" in issue
    assert load_pack(root, tools={"lookup"}).nodes["t"].tool == "lookup"


def test_it_refuses_a_tool_node_naming_a_tool_the_manifest_does_not_list(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"t": {"kind": "tool", "tool": "rm_rf", "writes": ["r"]}, "done": {"kind": "end"}},
        edges=[{"from": "t", "to": "done"}],
    )
    [issue] = issues_of(root)
    assert "uses tool 'rm_rf', which the manifest's 'tools' does not list" in issue


def test_it_refuses_on_unsure_without_samples(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "done": {"kind": "end"}, "hold": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}, {"from": "a", "on_unsure": "hold"}],
    )
    [issue] = issues_of(root)
    assert "on_unsure edge but no 'samples'" in issue


def test_it_refuses_an_unsafe_expression_at_load(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done", "when": "__import__('os').system('x')"}],
    )
    [issue] = issues_of(root)
    assert "bad expression" in issue and issue.startswith("graph.yaml:")


def test_it_refuses_a_prompt_placeholder_outside_the_reads(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": GEN, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}],
        prompts={"a": "{{ input.ticket }} {{ input.secret }}"},
    )
    [issue] = issues_of(root)
    assert "uses {{ input.secret }}, which is not in the node's reads" in issue


def test_it_reports_bad_evalset_lines_with_line_numbers(triage: Path) -> None:
    (triage / "evalset.jsonl").write_text(
        '{"id": "ok", "input": {"ticket": "x"}, "expected": {}}\n'
        "{not json\n"
        '{"id": "ok", "input": {}, "expected": {}}\n'
        '{"input": "text", "expected": {}, "ends": "done"}\n'
    )
    found = issues_of(triage)
    assert any(i.startswith("evalset.jsonl:2: not valid JSON") for i in found)
    assert any(i.startswith("evalset.jsonl:3: duplicate case id 'ok'") for i in found)
    assert any(i.startswith("evalset.jsonl:4: unknown key 'ends'") and "did you mean 'end'" in i for i in found)
    assert any(i.startswith("evalset.jsonl:4: 'input' is required") for i in found)


def test_it_reports_every_problem_at_once(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"colour": "red"},
        nodes={"a": {**GEN, "two_stage": "yes"}, "done": {"kind": "end"}, "x": {"kind": "end"}},
        edges=[{"from": "a", "to": "nowhere"}, {"from": "a", "on_unsure": "done"}],
    )
    (root / "grammars" / "a.json").write_text("{")
    (root / "evalset.jsonl").write_text("nope\n")
    found = issues_of(root)
    files = {i.split(":")[0] for i in found}
    assert files == {"manifest.yaml", "graph.yaml", "grammars/a.json", "evalset.jsonl"}
    assert len(found) >= 6


def test_it_refuses_a_directory_that_is_not_a_pack(tmp_path: Path) -> None:
    found = issues_of(tmp_path)
    assert "manifest.yaml: missing file" in found[0]


def test_it_refuses_a_human_question_using_fields_outside_the_reads(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"ask": {"kind": "human", "reads": [], "writes": ["ok"]}, "done": {"kind": "end"}},
        edges=[{"from": "ask", "to": "done"}],
        prompts={"ask": "Approve {{ input.secret }}?"},
        grammars={"ask": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
    )
    [issue] = issues_of(root)
    assert "prompts/ask.txt uses {{ input.secret }}, which is not in the node's reads" in issue


@pytest.mark.parametrize(
    "breakage, kind",
    [
        (lambda root: (root / "graph.yaml").write_text("nodes:\n  a:\n    kind: [generate\n"), "syntax"),
        (lambda root: (root / "prompts" / "classify.txt").unlink(), "missing"),
        (lambda root: (root / "grammars" / "classify.json").write_text('{"type": 3}'), "schema"),
        (lambda root: (root / "evalset.jsonl").write_text("not json\n"), "evalset"),
    ],
)
def test_it_gives_each_issue_a_machine_readable_kind(triage: Path, breakage: Any, kind: str) -> None:
    breakage(triage)
    with pytest.raises(PackInvalid) as exc:
        load_pack(triage)
    assert kind in PACK_ISSUE_KINDS and [i.kind for i in exc.value.issues] == [kind]


def test_it_calls_an_edge_to_an_unknown_node_a_reference_issue(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", nodes={"a": GEN, "done": {"kind": "end"}}, edges=[{"from": "a", "to": "doen"}])
    with pytest.raises(PackInvalid) as exc:
        load_pack(root)
    assert "reference" in {i.kind for i in exc.value.issues}
