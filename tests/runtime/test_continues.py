"""`continues: NODE` (runtime.messages): a node's call goes on from an earlier node's
conversation, so a server's prompt cache holds all of it but the answer and the new
request. Runs go to the fault-injecting server on loopback; what is asserted is what
went over the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime import load_pack, run_pack
from runtime.backends import Backend
from tests.support.fault_server import FaultServer, in_order
from tests.support.hierarchy import write_hierarchy
from tests.support.runtime_packs import issues_of


def test_a_continuing_call_is_the_earlier_conversation_then_its_answer_then_the_request(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        manifest={"system": "prompts/system.txt"},
        sub={"continues": "top"},
        files={"prompts/system.txt": "You sort things.\n"},
    )
    fault.configure(answer=in_order('{"label": "animal"}', '{"sublabel":"dog"}'))
    result = run_pack(load_pack(root), {"text": "a barking dog"}, backend=backend)
    assert result.status == "done" and result.output == {"label": "animal", "sublabel": "dog"}
    first, second = (r.body["messages"] for r in fault.completions())
    assert second == [
        *first,  # the earlier call, as it was sent: the prefix the server has cached
        {"role": "assistant", "content": '{"label":"animal"}'},  # the committed answer, compact
        {"role": "user", "content": "It is a animal. Which one: a barking dog\n"},
    ]
    assert first == [
        {"role": "system", "content": "You sort things.\n"},
        {"role": "user", "content": "Kind of thing: a barking dog\n"},
    ]


@pytest.mark.parametrize(
    ("sub", "files", "expected"),
    [
        ({"continues": "top", "system": "prompts/s.txt"}, {"prompts/s.txt": "x"}, "takes its system from that node"),
        (
            {"continues": "top", "examples": {"file": "ex.jsonl", "count": 1}},
            {
                "ex.jsonl": '{"id": "e1", "input": {"text": "a cat"}, "expected": {"label": "animal", "sublabel": "cat"}}\n'
            },
            "takes its examples from that node",
        ),
        ({"continues": "nope"}, {}, "node 'sub' continues 'nope', which is not a node in graph.yaml"),
        ({"continues": "done"}, {}, "node 'sub' continues 'done', a end node"),
        ({"continues": "sub"}, {}, "node 'sub' continues in a circle (sub -> sub)"),
        ({"continues": ""}, {}, "continues must name a generate node"),
        (
            {"continues": "top", "reads": ["label"]},
            {"prompts/sub.txt": "Which {{ label }}?\n"},
            "node 'sub' continues 'top', whose conversation shows 'input.text'; add it to the node's reads",
        ),
    ],
)
def test_it_refuses_a_continues_it_cannot_follow(
    tmp_path: Path, sub: dict[str, Any], files: dict[str, str], expected: str
) -> None:
    found = issues_of(write_hierarchy(tmp_path / "p", sub=sub, files=files))
    assert len(found) == 1 and expected in found[0] and found[0].startswith("graph.yaml:"), found


def with_top_examples(root: Path, lines: list[dict[str, Any]]) -> Path:
    """The hierarchy pack with fixed few-shot examples on `top` (the node `sub` continues)."""
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    graph["nodes"]["top"]["examples"] = {"file": "examples.jsonl", "count": len(lines), "strategy": "fixed"}
    (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
    (root / "examples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


CAT = {"id": "e1", "input": {"text": "a small grey cat"}, "expected": {"label": "animal", "sublabel": "cat"}}


def test_the_shared_examples_show_the_continuing_nodes_answers_too(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = with_top_examples(write_hierarchy(tmp_path / "p", sub={"continues": "top"}), [CAT])
    fault.configure(answer=in_order('{"label":"animal"}', '{"sublabel":"dog"}'))
    run_pack(load_pack(root), {"text": "a barking dog"}, backend=backend)
    first, second = (r.body["messages"] for r in fault.completions())
    assert first[1:] == [
        {"role": "user", "content": "Kind of thing: a small grey cat\n"},
        {"role": "assistant", "content": '{"label":"animal","sublabel":"cat"}'},  # sub's answer shown too
        {"role": "user", "content": "Kind of thing: a barking dog\n"},
    ]
    assert second[: len(first)] == first


def test_it_refuses_a_shared_example_without_the_continuing_nodes_answer(tmp_path: Path) -> None:
    no_sublabel = {**CAT, "expected": {"label": "animal"}}
    root = with_top_examples(write_hierarchy(tmp_path / "p", sub={"continues": "top"}), [no_sublabel])
    assert issues_of(root) == [
        "examples.jsonl:1: example 'e1' has no expected sublabel: node 'sub' continues the conversation "
        "of 'top', whose few-shot answers show it"
    ]


def test_it_checks_the_examples_of_a_chains_first_node_for_every_later_answer(tmp_path: Path) -> None:
    """top <- sub <- last: top's examples show sub's and last's answers, so each must hold them."""
    root = with_top_examples(write_hierarchy(tmp_path / "p", sub={"continues": "top"}), [CAT])
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    graph["nodes"]["last"] = {
        "kind": "generate",
        "reads": ["input.text", "label", "sublabel"],
        "writes": ["note"],
        "continues": "sub",
    }
    graph["edges"] = [
        e if e != {"from": "sub", "to": "done"} else {"from": "sub", "to": "last"} for e in graph["edges"]
    ]
    graph["edges"].append({"from": "last", "to": "done"})
    (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
    (root / "prompts" / "last.txt").write_text("A note on the {{ sublabel }}?\n")
    schema = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    (root / "grammars" / "last.json").write_text(json.dumps(schema))
    assert issues_of(root) == [
        "examples.jsonl:1: example 'e1' has no expected note: node 'last' continues the conversation "
        "of 'top', whose few-shot answers show it"
    ]
