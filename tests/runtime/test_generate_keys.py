"""Issue 10 items 5-7: per-call label choices, system prompts, few-shot examples, input
truncation, and an input that overflows the model's context. Runs go to the
fault-injecting OpenAI-compatible server on loopback (a real HTTP server), so what is
asserted is what went over the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime import load_pack, run_pack
from runtime.backends import Backend, ModelCall, open_backend
from runtime.backends._grammar import schema_to_gbnf
from runtime.evaluate import evaluate
from runtime.fewshot import Example, Examples, choose, words
from runtime.messages import SYSTEM, cut
from runtime.pack.model import Truncation
from tests.support.fault_server import FaultServer, in_order
from tests.support.hierarchy import SUB, write_hierarchy
from tests.support.runtime_packs import issues_of

# -- choices: loading ------------------------------------------------------------------


def test_it_refuses_a_missing_labels_file(tmp_path: Path) -> None:
    root = write_hierarchy(tmp_path / "p")
    (root / "labels" / "sublabels.yaml").unlink()
    assert any(i.startswith("labels/sublabels.yaml: missing file") for i in issues_of(root))


def test_it_refuses_a_label_that_is_not_a_string_naming_its_line(tmp_path: Path) -> None:
    root = write_hierarchy(tmp_path / "p", files={"labels/sublabels.yaml": "animal:\n  - cat\n  - 3\nplant: [tree]\n"})
    assert issues_of(root) == ["labels/sublabels.yaml:3: label 3 must be a non-empty string; quote it"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- cat\n- dog\n", "must map each value of label to a list of labels"),
        ("animal: cat\n", "'animal' must map to a list of labels"),
        ("animal: [cat\n", "YAML syntax error"),
    ],
)
def test_it_refuses_a_labels_file_of_the_wrong_shape(tmp_path: Path, text: str, expected: str) -> None:
    root = write_hierarchy(tmp_path / "p", files={"labels/sublabels.yaml": text})
    found = issues_of(root)
    assert len(found) == 1 and found[0].startswith("labels/sublabels.yaml") and expected in found[0]


@pytest.mark.parametrize(
    ("choices", "expected"),
    [
        ({"other": {"labels": "sublabels", "key": "label"}}, "choices names 'other', which the node does not write"),
        ({"sublabel": {"labels": "sublabels", "key": "nothing"}}, "key 'nothing' is not in the node's reads"),
        ({"sublabel": {"labels": "sublabels", "key": "label", "when": 1}}, "unknown key 'when'"),
        ({"sublabel": {"labels": "../x", "key": "label"}}, "labels must be a file name under labels/"),
    ],
)
def test_it_refuses_a_bad_choices_key(tmp_path: Path, choices: dict[str, Any], expected: str) -> None:
    found = issues_of(write_hierarchy(tmp_path / "p", sub={"choices": choices}))
    assert len(found) == 1 and found[0].startswith("graph.yaml:") and expected in found[0]


def test_it_refuses_choices_on_a_field_that_is_not_a_string(tmp_path: Path) -> None:
    root = write_hierarchy(tmp_path / "p")
    (root / "grammars" / "sub.json").write_text(json.dumps({**SUB, "properties": {"sublabel": {"type": "integer"}}}))
    assert any("must declare 'sublabel' as a string property" in i for i in issues_of(root))


def test_it_refuses_a_plain_labels_file_that_is_a_mapping(tmp_path: Path) -> None:
    root = write_hierarchy(tmp_path / "p", sub={"choices": {"sublabel": {"labels": "sublabels"}}})
    assert any("without 'key'" in i and "must be a list of labels" in i for i in issues_of(root))


# -- choices: per call -----------------------------------------------------------------


@pytest.mark.parametrize(("label", "allowed"), [("animal", ["cat", "dog"]), ("plant", ["tree", "moss"])])
def test_it_sends_the_labels_allowed_by_state_as_the_grammar(
    tmp_path: Path, fault: FaultServer, backend: Backend, label: str, allowed: list[str]
) -> None:
    fault.configure(answer=in_order(json.dumps({"label": label}), json.dumps({"sublabel": allowed[1]})))
    result = run_pack(load_pack(write_hierarchy(tmp_path / "p")), {"text": "x"}, backend=backend)
    assert result.status == "done" and result.output["sublabel"] == allowed[1]
    sent = fault.completions()[1].body["response_format"]["json_schema"]["schema"]
    assert sent["properties"]["sublabel"] == {"type": "string", "enum": allowed}


def test_it_sends_the_allowed_labels_in_a_gbnf_grammar(tmp_path: Path, fault: FaultServer) -> None:
    fault.configure(answer=in_order('{"label":"plant"}', '{"sublabel":"moss"}'))
    gbnf = open_backend(fault.spec("grammar=gbnf"))
    try:
        result = run_pack(load_pack(write_hierarchy(tmp_path / "p")), {"text": "x"}, backend=gbnf)
    finally:
        gbnf.close()
    assert result.status == "done"
    grammar = fault.completions()[1].body["grammar"]
    assert '"\\"tree\\"" | "\\"moss\\""' in grammar and "cat" not in grammar


def test_it_rejects_a_label_outside_the_allowed_subset(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    # "tree" is a valid sublabel, but not for an animal: verification uses the per-call schema.
    fault.configure(answer=in_order('{"label":"animal"}', *['{"sublabel":"tree"}'] * 4))
    result = run_pack(load_pack(write_hierarchy(tmp_path / "p")), {"text": "x"}, backend=backend)
    assert result.trace.end_node == "review" and "sublabel" not in result.output
    rejected = [a for a in result.trace.attempts if a.node == "sub"]
    assert [a.category for a in rejected] == ["schema"] * 4
    assert rejected[0].reason == 'sublabel must be one of: "cat", "dog"'


def test_it_fails_the_node_when_the_state_has_no_labels(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    root = write_hierarchy(tmp_path / "p", files={"labels/sublabels.yaml": "animal: [cat, dog]\n"})
    fault.configure(answer=in_order('{"label":"plant"}'))
    result = run_pack(load_pack(root), {"text": "x"}, backend=backend)
    step = result.trace.steps[1]
    assert (step.node, step.status, result.trace.end_node) == ("sub", "fail", "review")
    assert (
        step.reason
        == "choices: labels/sublabels.yaml has no entry for label = \"plant\", so 'sublabel' has no allowed labels"
    )
    assert len(fault.completions()) == 1  # the model is not asked


def test_it_takes_a_plain_list_of_labels_without_a_key(tmp_path: Path, fault: FaultServer, backend: Backend) -> None:
    root = write_hierarchy(
        tmp_path / "p", sub={"choices": {"sublabel": {"labels": "all"}}}, files={"labels/all.yaml": "- fern\n- oak\n"}
    )
    fault.configure(answer=in_order('{"label":"plant"}', '{"sublabel":"oak"}'))
    result = run_pack(load_pack(root), {"text": "x"}, backend=backend)
    assert result.output["sublabel"] == "oak"
    assert fault.completions()[1].body["response_format"]["json_schema"]["schema"]["properties"]["sublabel"][
        "enum"
    ] == [
        "fern",
        "oak",
    ]


# -- system prompts --------------------------------------------------------------------


def test_it_sends_the_pack_system_prompt_and_a_node_override(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        manifest={"system": "prompts/system.txt"},
        sub={"system": "prompts/sub_system.txt"},
        files={"prompts/system.txt": "You sort things.\n", "prompts/sub_system.txt": "You know every {{ label }}.\n"},
    )
    fault.configure(answer=in_order('{"label":"animal"}', '{"sublabel":"dog"}'))
    run_pack(load_pack(root), {"text": "x"}, backend=backend)
    systems = [r.body["messages"][0] for r in fault.completions()]
    assert systems == [
        {"role": "system", "content": "You sort things.\n"},
        {"role": "system", "content": "You know every animal.\n"},
    ]


def test_it_keeps_the_built_in_system_line_without_a_system_key(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    fault.configure(answer=in_order('{"label":"animal"}', '{"sublabel":"dog"}'))
    run_pack(load_pack(write_hierarchy(tmp_path / "p")), {"text": "x"}, backend=backend)
    assert fault.completions()[0].body["messages"][0] == {"role": "system", "content": SYSTEM}


def test_it_refuses_a_system_template_that_reads_what_a_node_does_not(tmp_path: Path) -> None:
    root = write_hierarchy(
        tmp_path / "p", manifest={"system": "prompts/system.txt"}, files={"prompts/system.txt": "About {{ label }}.\n"}
    )
    found = issues_of(root)
    assert len(found) == 1 and "node 'top' does not read" in found[0] and found[0].startswith("manifest.yaml:")


def test_it_refuses_a_missing_system_template(tmp_path: Path) -> None:
    root = write_hierarchy(tmp_path / "p", sub={"system": "prompts/nope.txt"})
    assert any(i.startswith("prompts/nope.txt: missing file") for i in issues_of(root))


# -- few-shot examples -----------------------------------------------------------------

EXAMPLES = [
    {"id": "e1", "input": {"text": "a small grey cat"}, "expected": {"label": "animal", "sublabel": "cat"}},
    {"id": "e2", "input": {"text": "a tall oak tree"}, "expected": {"label": "plant", "sublabel": "tree"}},
    {"id": "e3", "input": {"text": "green moss on a rock"}, "expected": {"label": "plant", "sublabel": "moss"}},
]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_it_sends_fixed_examples_as_user_and_assistant_turns(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        sub={"examples": {"file": "examples.jsonl", "count": 2, "strategy": "fixed"}},
        files={"examples.jsonl": jsonl(EXAMPLES)},
    )
    fault.configure(answer=in_order('{"label":"animal"}', '{"sublabel":"dog"}'))
    run_pack(load_pack(root), {"text": "a barking dog"}, backend=backend)
    messages = fault.completions()[1].body["messages"]
    assert messages[1:] == [
        {"role": "user", "content": "It is a animal. Which one: a small grey cat\n"},
        {"role": "assistant", "content": '{"sublabel":"cat"}'},
        {"role": "user", "content": "It is a plant. Which one: a tall oak tree\n"},
        {"role": "assistant", "content": '{"sublabel":"tree"}'},
        {"role": "user", "content": "It is a animal. Which one: a barking dog\n"},
    ]


def test_it_shows_only_examples_that_match_the_state_with_match(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        sub={"examples": {"file": "examples.jsonl", "count": 3, "strategy": "nearest", "match": ["label"]}},
        files={"examples.jsonl": jsonl(EXAMPLES)},
    )
    fault.configure(answer=in_order('{"label":"plant"}', '{"sublabel":"tree"}'))
    # The input shares most words with the cat example, which is not a plant: not shown.
    result = run_pack(load_pack(root), {"text": "a small grey oak"}, backend=backend)
    assert result.state["sublabel"] == "tree"
    messages = fault.completions()[1].body["messages"]
    assert [m["content"] for m in messages[1:-1]] == [
        "It is a plant. Which one: green moss on a rock\n",
        '{"sublabel":"moss"}',
        "It is a plant. Which one: a tall oak tree\n",
        '{"sublabel":"tree"}',
    ]
    sub = next(step for step in result.trace.steps if step.node == "sub")
    assert 'only 2 in examples.jsonl match label="plant"' in " ".join(sub.notes)


def test_match_keeps_examples_whose_expected_values_equal_the_state() -> None:
    items = tuple(Example(e["id"], e["input"], e["expected"], i + 1, words(e["input"])) for i, e in enumerate(EXAMPLES))
    matched = Examples("examples.jsonl", 2, "fixed", items, ("label",))
    assert [e.id for e in choose(matched, {"text": "x"}, state={"label": "plant"})] == ["e2", "e3"]
    assert [e.id for e in choose(matched, {"text": "x"}, state={"label": "animal"})] == ["e1"]  # fewer than count
    assert choose(matched, {"text": "x"}, state={"label": "fungus"}) == []
    assert choose(matched, {"text": "x"}, state={}) == []  # a field not in the state matches nothing


def test_match_compares_the_value_at_a_path_as_canonical_json() -> None:
    rows = [
        ({"customer": {"tier": "gold", "id": 7}, "vip": True}, "a"),
        ({"customer": {"tier": "gold", "id": 8}, "vip": 1}, "b"),
        ({"customer": {"tier": "silver", "id": 9}, "vip": True}, "c"),
    ]
    items = tuple(
        Example(i, {"text": i}, {**e, "sublabel": "x"}, n, words({"text": i})) for n, (e, i) in enumerate(rows)
    )
    by_tier = Examples("examples.jsonl", 3, "fixed", items, ("customer.tier",))
    state = {"customer": {"id": 1, "tier": "gold"}, "vip": True}
    assert [e.id for e in choose(by_tier, {"text": "x"}, state=state)] == ["a", "b"]  # the other keys do not count
    by_flag = Examples("examples.jsonl", 3, "fixed", items, ("vip",))
    assert [e.id for e in choose(by_flag, {"text": "x"}, state=state)] == ["a", "c"]  # true is not 1
    assert choose(by_tier, {"text": "x"}, state={"customer": "gold"}) == []  # no such path in the state


def test_match_takes_a_path_inside_a_read_and_refuses_one_above_it(tmp_path: Path) -> None:
    inside = write_hierarchy(
        tmp_path / "inside",
        sub={
            "reads": ["input.text", "label.name"],
            "choices": None,
            "examples": {"file": "examples.jsonl", "match": ["label.name"]},
        },
        files={
            "examples.jsonl": jsonl(
                [{"id": "e", "input": {"text": "a"}, "expected": {"label": {"name": "x"}, "sublabel": "cat"}}]
            ),
            "prompts/sub.txt": "It is a {{ label.name }}. Which one: {{ input.text }}\n",
        },
    )
    examples = load_pack(inside).nodes["sub"].examples
    assert examples is not None and examples.match == ("label.name",)
    above = write_hierarchy(
        tmp_path / "above",
        sub={
            "reads": ["input.text", "label.name"],
            "choices": None,
            "examples": {"file": "examples.jsonl", "match": ["label"]},
        },
        files={"prompts/sub.txt": "It is a {{ label.name }}. Which one: {{ input.text }}\n"},
    )
    assert any("examples.match: 'label' is not a state field node 'sub' reads" in i for i in issues_of(above))


def test_it_chooses_the_nearest_examples_by_word_overlap() -> None:
    items = tuple(Example(e["id"], e["input"], e["expected"], i + 1, words(e["input"])) for i, e in enumerate(EXAMPLES))
    nearest = Examples("examples.jsonl", 2, "nearest", items)
    assert [e.id for e in choose(nearest, {"text": "moss and a tree on a rock"})] == ["e2", "e3"]  # nearest last
    assert [e.id for e in choose(nearest, {"text": "nothing shared"})] == ["e2", "e1"]  # ties: file order
    assert [e.id for e in choose(Examples("x", 2, "fixed", items), {"text": "moss"})] == ["e1", "e2"]


def test_a_case_is_never_its_own_few_shot_example() -> None:
    items = tuple(Example(e["id"], e["input"], e["expected"], i + 1, words(e["input"])) for i, e in enumerate(EXAMPLES))
    nearest, fixed = Examples("examples.jsonl", 2, "nearest", items), Examples("examples.jsonl", 2, "fixed", items)
    assert [e.id for e in choose(nearest, {"text": "a tall oak tree"})] == ["e3", "e1"]  # e2 is this very input
    assert [e.id for e in choose(fixed, {"text": "a small grey cat"})] == ["e2", "e3"]
    # Compared as canonical JSON: key order does not matter, any other difference does.
    two = Example("t", {"b": 1, "a": "x"}, {}, 4, words({"a": "x"}))
    assert [e.id for e in choose(Examples("x", 4, "fixed", (*items, two)), {"a": "x", "b": 1})] == ["e1", "e2", "e3"]
    assert "t" in [e.id for e in choose(Examples("x", 4, "fixed", (*items, two)), {"a": "x", "b": 2})]
    # A call shown a cut input (truncate) still skips the example of its uncut input.
    assert [e.id for e in choose(fixed, {"text": "a small"}, own={"text": "a small grey cat"})] == ["e2", "e3"]


@pytest.mark.parametrize(
    ("example", "same"),
    [
        ({"id": "case-1", "input": {"text": "new"}, "expected": {"label": "animal", "sublabel": "cat"}}, "id"),
        ({"id": "fresh", "input": {"text": "a cat"}, "expected": {"label": "animal", "sublabel": "cat"}}, "input"),
    ],
)
def test_it_refuses_an_example_that_is_an_evalset_case(tmp_path: Path, example: dict[str, Any], same: str) -> None:
    case = {"id": "case-1", "input": {"text": "a cat"}, "expected": {"label": "animal", "sublabel": "cat"}}
    root = write_hierarchy(
        tmp_path / "p",
        sub={"examples": {"file": "examples.jsonl", "count": 1}},
        files={"examples.jsonl": jsonl([EXAMPLES[0], example]), "evalset.jsonl": "\n" + jsonl([case])},
    )
    assert issues_of(root) == [
        f"examples.jsonl:2: example '{example['id']}' has the same {same} as evalset case 'case-1' "
        "(evalset.jsonl line 2); few-shot examples must not come from the evalset: remove or change it"
    ]


@pytest.mark.parametrize(
    ("spec", "text", "expected"),
    [
        ({"file": "examples.jsonl"}, '{"id": "e", "input": {}, "expected": {"label": "x"}}\n', "examples.jsonl:1:"),
        ({"file": "missing.jsonl"}, "", "missing.jsonl: missing file"),
        ({"file": "examples.jsonl", "strategy": "random"}, "", "examples.strategy must be one of: fixed, nearest"),
        ({"file": "evalset.jsonl"}, "", "cannot be the evalset"),
        (
            {"file": "examples.jsonl", "match": ["sublabel"]},
            "",
            "examples.match: 'sublabel' is not a state field node 'sub' reads and does not write "
            "(its state reads: label); add it to reads or remove it from match",
        ),
        ({"file": "examples.jsonl", "match": "label"}, "", "examples.match must be a list of state fields"),
        (  # sub's prompt shows {{ label }}: an example without it would be rendered with null
            {"file": "examples.jsonl"},
            '{"id": "e", "input": {"text": "a cat"}, "expected": {"sublabel": "cat"}}\n',
            "examples.jsonl:1: example 'e' has no expected label: node 'sub' reads it",
        ),
    ],
)
def test_it_refuses_bad_examples(tmp_path: Path, spec: dict[str, Any], text: str, expected: str) -> None:
    root = write_hierarchy(tmp_path / "p", sub={"examples": spec}, files={"examples.jsonl": text} if text else {})
    assert any(expected in i for i in issues_of(root))


# -- truncation ------------------------------------------------------------------------


def test_it_cuts_head_tail_or_middle() -> None:
    assert cut("abcdefghij", Truncation(4, "head")) == "abcd"
    assert cut("abcdefghij", Truncation(4, "tail")) == "ghij"
    assert cut("abcdefghij", Truncation(5, "middle")) == "abcij"
    assert cut("abc", Truncation(4, "head")) == "abc"


def test_it_truncates_the_input_the_prompts_see_and_notes_it(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(tmp_path / "p", manifest={"truncate": {"text": {"max_chars": 5, "keep": "tail"}}})
    fault.configure(answer=in_order('{"label":"animal"}', '{"sublabel":"dog"}'))
    text = {"text": "0123456789"}
    result = run_pack(load_pack(root), text, backend=backend)
    assert fault.completions()[0].body["messages"][-1]["content"] == "Kind of thing: 56789\n"
    assert result.trace.steps[0].notes == ["input.text cut from 10 to 5 chars (keep tail)"]
    assert text == {"text": "0123456789"} and result.state.get("input", text) == text


@pytest.mark.parametrize(
    ("truncate", "expected"),
    [
        ({"text": {"max_chars": 0}}, "truncate.text.max_chars must be a whole number >= 1"),
        ({"text": {"max_chars": 5, "keep": "end"}}, "truncate.text.keep must be one of: head, tail, middle"),
        ({"body": {"max_chars": 5}}, "truncate names 'body', which is not in inputs"),
        ({"text": {"chars": 5}}, "unknown key 'chars'"),
    ],
)
def test_it_refuses_a_bad_truncate(tmp_path: Path, truncate: dict[str, Any], expected: str) -> None:
    found = issues_of(write_hierarchy(tmp_path / "p", manifest={"truncate": truncate}))
    assert len(found) == 1 and found[0].startswith("manifest.yaml:") and expected in found[0]


# -- context overflow ------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        {
            "status": 400,
            "message": "request (1841 tokens) exceeds the available context size (1024 tokens)",
            "type": "exceed_context_size_error",
        },
        {
            "status": 400,
            "message": "This model's maximum context length is 8192 tokens",
            "code": "context_length_exceeded",
        },
    ],
)
def test_it_takes_on_fail_when_the_input_overflows_the_context(
    tmp_path: Path, fault: FaultServer, backend: Backend, error: dict[str, Any]
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        files={"evalset.jsonl": jsonl([{"id": "c", "input": {"text": "x"}, "expected": {"sublabel": "cat"}}])},
    )
    fault.configure(answer=in_order('{"label":"animal"}'), script=["ok", error])
    case = evaluate(load_pack(root), backend, concurrency=1).cases[0]
    assert (case.status, case.trace.end_node, case.blamed) == ("done", "review", "sub")
    assert case.trace.steps[1].reason.startswith("input does not fit the model's context: ")
    assert len(fault.completions()) == 2  # never retried


def test_it_fails_the_run_at_the_node_without_an_on_fail_edge(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = write_hierarchy(tmp_path / "p")
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    graph["edges"] = [e for e in graph["edges"] if "on_fail" not in e]
    del graph["nodes"]["review"]
    (root / "graph.yaml").write_text(yaml.safe_dump(graph))
    fault.configure(script=[{"status": 400, "message": "too long", "type": "exceed_context_size_error"}])
    result = run_pack(load_pack(root), {"text": "x"}, backend=backend)
    assert result.status == "failed"
    assert result.trace.steps[-1].node == "top" and result.trace.steps[-1].status == "fail"
    assert result.trace.steps[-1].reason.startswith("input does not fit the model's context: ")


def test_it_cuts_examples_first_when_a_request_overflows_the_context(
    tmp_path: Path, fault: FaultServer, backend: Backend
) -> None:
    root = tmp_path / "p"
    (root / "prompts").mkdir(parents=True)
    (root / "grammars").mkdir()
    (root / "manifest.yaml").write_text("name: fit\nversion: '1'\nentry: tag\ninputs: [text]\n")
    (root / "graph.yaml").write_text(
        "nodes:\n"
        "  tag: {kind: generate, reads: [input.text], writes: [label],\n"
        "        examples: {file: examples.jsonl, count: 3, strategy: fixed}}\n"
        "  done: {kind: end}\n"
        "edges:\n  - {from: tag, to: done}\n"
    )
    (root / "prompts" / "tag.txt").write_text("Tag: {{ input.text }}\n")
    (root / "grammars" / "tag.json").write_text(
        json.dumps({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]})
    )
    (root / "examples.jsonl").write_text(
        jsonl([{"id": f"e{i}", "input": {"text": f"example {i}"}, "expected": {"label": f"l{i}"}} for i in range(3)])
    )
    overflow = {
        "status": 400,
        "message": "request exceeds the available context size",
        "type": "exceed_context_size_error",
    }
    fault.configure(answer='{"label":"x"}', script=[overflow, overflow, "ok"])
    result = run_pack(load_pack(root), {"text": "the one to tag"}, backend=backend)
    assert result.status == "done" and result.output == {"label": "x"}
    sent = [len(c.body["messages"]) for c in fault.completions()]
    assert sent == [8, 6, 4]  # system + 3, 2, then 1 example pair + the request
    kept = fault.completions()[2].body["messages"]
    assert kept[1]["content"] == "Tag: example 2\n"  # the example nearest the request is the last one cut


# -- the compact grammar ---------------------------------------------------------------


def test_it_sends_a_compact_gbnf_grammar_by_default(fault: FaultServer) -> None:
    assert " ws " not in schema_to_gbnf(SUB, compact=True).text
    assert "ws ::= [ ]?" in schema_to_gbnf(SUB).text
    for options, spaced in (("grammar=gbnf", False), ("grammar=gbnf;compact=false", True)):
        fault.configure(answer='{"sublabel":"x"}')
        opened = open_backend(fault.spec(options))
        try:
            opened.complete(ModelCall("r", "sub", 1, [{"role": "user", "content": "hi"}], SUB))
        finally:
            opened.close()
        assert ("ws ::=" in fault.completions()[0].body["grammar"]) is spaced
