"""Issue 10 items 5-7 against a real llama-server (stories260K: only the wire contract
matters here): a state-dependent enum compiled into each call's grammar, few-shot turns
and the compact GBNF accepted and obeyed, and an input longer than the context taking
on_fail. Runs only where the llama-server binary is already cached
(PACKFORGE_BUILD_CACHE); it never builds llama.cpp."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import load_pack, run_pack
from runtime.evaluate import evaluate
from tests.support import model_servers
from tests.support.hierarchy import write_hierarchy
from tests.support.model_servers import Opener, RunningServer, spec

CTX = 512
EXAMPLES = [
    {"id": "e1", "input": {"text": "a small grey cat"}, "expected": {"label": "animal", "sublabel": "cat"}},
    {"id": "e2", "input": {"text": "a tall oak tree"}, "expected": {"label": "plant", "sublabel": "tree"}},
]
ALLOWED = {"animal": {"cat", "dog"}, "plant": {"tree", "moss"}}


@pytest.fixture(scope="module")
def small_context_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    if not model_servers.llama_server_binary().exists() or not model_servers.MODEL.exists():
        pytest.skip(f"no cached llama-server at {model_servers.llama_server_binary()} (set PACKFORGE_BUILD_CACHE)")
    server = model_servers.start_llama_server(Path(tmp_path_factory.mktemp("llama-small")), parallel=1, ctx=CTX)
    yield server
    server.stop()


@pytest.mark.parametrize("mode", ["gbnf", "gbnf;compact=false", "json_schema"])
def test_it_constrains_each_call_to_the_labels_the_state_allows(
    small_context_server: RunningServer, opened: Opener, tmp_path: Path, mode: str
) -> None:
    root = write_hierarchy(
        tmp_path / "p",
        sub={"examples": {"file": "examples.jsonl", "count": 2, "strategy": "nearest"}, "temperature": 1.0},
        manifest={"system": "prompts/system.txt"},
        files={
            "examples.jsonl": "".join(json.dumps(e) + "\n" for e in EXAMPLES),
            "prompts/system.txt": "Answer with JSON.\n",
        },
    )
    backend = opened(spec(small_context_server, f"grammar={mode};concurrency=1"))
    pack = load_pack(root)
    for i in range(6):
        result = run_pack(pack, {"text": f"story {i}"}, backend=backend)
        assert result.status == "done" and result.trace.end_node == "done", result.trace.error
        assert result.output["sublabel"] in ALLOWED[result.state["label"]]
        if mode == "gbnf":
            assert all(" " not in a.text for a in result.trace.attempts)  # nothing between JSON tokens


def test_it_takes_on_fail_when_the_input_is_longer_than_the_context(
    small_context_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    case = {"id": "long", "input": {"text": "cat " * 4000}, "expected": {"label": "animal", "sublabel": "cat"}}
    root = write_hierarchy(tmp_path / "p", files={"evalset.jsonl": json.dumps(case) + "\n"})
    graph = root / "graph.yaml"
    graph.write_text(graph.read_text().replace("- from: sub\n  on_fail: review\n", "- from: top\n  on_fail: review\n"))
    backend = opened(spec(small_context_server, "concurrency=1"))
    result = evaluate(load_pack(root), backend, concurrency=1).cases[0]
    assert (result.trace.end_node, result.blamed) == ("review", "top")
    step = result.trace.steps[0]
    assert step.status == "fail" and "exceeds the available context size" in step.reason
    assert step.reason.startswith("input does not fit the model's context: ")
    assert len(result.trace.attempts) == 0  # refused before any answer: nothing to retry


def test_it_fits_the_same_input_once_truncated(
    small_context_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    root = write_hierarchy(tmp_path / "p", manifest={"truncate": {"text": {"max_chars": 200, "keep": "head"}}})
    result = run_pack(load_pack(root), {"text": "cat " * 4000}, backend=opened(spec(small_context_server)))
    assert result.status == "done" and result.trace.end_node == "done", result.trace.error
    assert result.trace.steps[0].notes == ["input.text cut from 16000 to 200 chars (keep head)"]
