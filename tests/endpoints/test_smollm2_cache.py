"""Against a real llama-server with SmolLM2-135M-Instruct (the fixture of test_smollm2.py):
draws of one node pinned to one slot read the prompt once and take the rest from the
slot's cache, recorded per call; draws stop once two of three agree; llama.cpp's grammar lets a repeated label through, and a
set-valued field takes it as a set instead of failing the node; an over-long input is
cut by the manifest's `truncate:` rule, or the failure names the rule to write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runtime import load_pack, run_pack
from tests.support.model_servers import Opener, RunningServer
from tests.support.smollm2_packs import ENDS, EXAMPLES, ONE_NODE_EDGES, department_node, smol_spec, write_pack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_draws_of_a_node_share_a_slot_and_read_the_prompt_once(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    backend = opened(smol_spec(smollm2_server, "concurrency=2;slots=2;grammar=gbnf"))
    node = department_node(samples=3, agree=2, temperature=0.7, draw_all=True)  # every draw, decided or not
    root = write_pack(tmp_path / "p", {"department": node, **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(root), {"message": "I was charged twice for one order."}, backend=backend)
    draws = [a for a in result.trace.attempts if a.node == "department"]
    assert len(draws) == 3
    for later in draws[1:]:  # the same prompt, on the slot the first draw left it in
        assert later.cached_tokens >= later.prompt_tokens - 2, (later.prompt_tokens, later.cached_tokens)
    totals = result.trace.totals()
    assert totals["cached_tokens"] >= 2 * (draws[0].prompt_tokens - 2)


def test_greedy_draws_that_agree_stop_the_node_after_two_calls(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    """At temperature 0 every draw is the same answer: two of three agree after the second
    call, so the third is never asked for, and the step says so."""
    backend = opened(smol_spec(smollm2_server, "concurrency=2;grammar=gbnf"))
    node = department_node(samples=3, agree=2, temperature=0.0)
    root = write_pack(tmp_path / "p", {"department": node, **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(root), {"message": "I was charged twice for one order."}, backend=backend)
    draws = [a for a in result.trace.attempts if a.node == "department"]
    assert result.trace.path == ["department", "done"], result.trace.steps[0].reason
    assert len(draws) == 2 and draws[0].text == draws[1].text
    assert "the vote was decided; stopped after 2 of 3 draws" in result.trace.steps[0].notes


LABELS = ["bug", "price", "ui"]


def labels_pack(root: Path) -> Path:
    """One node writing a set of labels; its prompt shows an answer with a repeat (the
    model copies it: the grammar, which llama.cpp builds without uniqueItems, lets it)."""
    for folder in ("prompts", "grammars"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    manifest = {"name": "aspects", "version": "1", "entry": "tag", "fields": {"labels": {"compare": "set"}}}
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    graph = {
        "nodes": {
            "tag": {"kind": "generate", "reads": ["input.review"], "writes": ["labels"], "max_tokens": 48},
            **ENDS,
        },
        "edges": [{"from": "tag", "to": "done"}, {"from": "tag", "on_fail": "escalate"}],
    }
    (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
    (root / "prompts" / "tag.txt").write_text(
        'Review: {{ input.review }}\nAnswer exactly like this: {"labels":["bug","bug","bug"]}\n'
    )
    schema = {
        "type": "object",
        "properties": {
            "labels": {"type": "array", "items": {"enum": LABELS}, "uniqueItems": True, "minItems": 1, "maxItems": 3}
        },
        "required": ["labels"],
        "additionalProperties": False,
    }
    (root / "grammars" / "tag.json").write_text(json.dumps(schema))
    return root


def test_a_repeated_label_does_not_fail_a_set_valued_node(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    backend = opened(smol_spec(smollm2_server, "grammar=gbnf"))
    root = labels_pack(tmp_path / "p")
    result = run_pack(load_pack(root), {"review": "The app crashes all the time."}, backend=backend)
    first = json.loads(result.trace.attempts[0].text)["labels"]
    assert len(first) > len(set(first)), f"the model did not repeat a label this time: {first}"
    assert result.status == "done" and result.trace.end_node == "done", result.trace.error
    assert result.output == {"labels": sorted(set(first))}
    assert any("taken as a set" in note for note in result.trace.steps[0].notes)


def test_an_over_long_input_is_cut_by_the_truncate_rule(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    backend = opened(smol_spec(smollm2_server, "concurrency=2"))
    long_message = "I was charged twice and I want my money back. " * 400  # well over 2048 tokens
    cut = write_pack(
        tmp_path / "cut",
        {"department": department_node(), **ENDS},
        ONE_NODE_EDGES,
        truncate={"message": {"max_chars": 1500, "keep": "head"}},
    )
    result = run_pack(load_pack(cut), {"message": long_message}, backend=backend)
    assert result.trace.end_node == "done", result.trace.error
    assert result.trace.steps[0].notes == [f"input.message cut from {len(long_message)} to 1500 chars (keep head)"]

    uncut = write_pack(tmp_path / "uncut", {"department": department_node(), **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(uncut), {"message": long_message}, backend=backend)
    assert result.trace.end_node == "escalate"
    assert "manifest.yaml has no truncate: rule for it" in result.trace.steps[0].reason


def test_a_continuing_node_finds_the_earlier_conversation_in_the_cache(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    """`continues: department`: the sub-issue call is the department call, its answer and
    the new request, so the server reads only the last two."""
    backend = opened(smol_spec(smollm2_server, "concurrency=1;grammar=gbnf"))
    department = department_node(examples={"file": "examples.jsonl", "count": 3, "strategy": "fixed"})
    subissue = {
        "kind": "generate",
        "reads": ["input.message", "department"],
        "writes": ["subissue"],
        "choices": {"subissue": {"labels": "subissues", "key": "department"}},
        "continues": "department",
        "max_tokens": 32,
    }
    edges = [
        {"from": "department", "to": "subissue"},
        {"from": "department", "on_fail": "escalate"},
        {"from": "subissue", "to": "done"},
        {"from": "subissue", "on_fail": "escalate"},
    ]
    root = write_pack(
        tmp_path / "p", {"department": department, "subissue": subissue, **ENDS}, edges, system="system.txt"
    )
    # the shared conversation's examples show both answers (docs/pack-format.md, "continues")
    subissues = {"ex-1": "double_charge", "ex-2": "damaged_item", "ex-3": "app_crash"}
    shown = [{**e, "expected": {**e["expected"], "subissue": subissues[e["id"]]}} for e in EXAMPLES]
    (root / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in shown))
    result = run_pack(load_pack(root), {"message": "Where is my refund for the returned kettle?"}, backend=backend)
    assert result.trace.path == ["department", "subissue", "done"], [s.reason for s in result.trace.steps]
    first, second = (next(a for a in result.trace.attempts if a.node == n) for n in ("department", "subissue"))
    assert second.cached_tokens >= first.prompt_tokens - 2, (first.prompt_tokens, second.cached_tokens)
    read = second.prompt_tokens - second.cached_tokens
    assert read < first.prompt_tokens / 3, (read, first.prompt_tokens)  # the answer and the new request
