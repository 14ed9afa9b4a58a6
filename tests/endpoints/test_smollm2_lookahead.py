"""Against a real llama-server with SmolLM2-135M-Instruct: a quorum's sure first draw
stands alone (`sure:`, from the server's logprobs); two nodes that read only the
input run side by side (runtime.lookahead) on two server slots; the run takes the reply
made ahead and commits in graph order. (Not the same answers bit for bit: llama.cpp's
numerics depend on what else is in the batch, so a greedy answer made beside another
call can differ; benchmarks/lookahead.py counts how often.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import load_pack, run_pack
from tests.support.model_servers import Opener, RunningServer
from tests.support.smollm2_packs import ENDS, ONE_NODE_EDGES, department_node, smol_spec, write_pack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

MOOD_SCHEMA = {
    "type": "object",
    "properties": {"mood": {"type": "string", "enum": ["calm", "upset"]}},
    "required": ["mood"],
    "additionalProperties": False,
}


def two_independent_nodes(root: Path) -> Path:
    """department -> mood -> done: mood reads the message, not the department."""
    nodes = {
        "department": department_node(),
        "mood": {"kind": "generate", "reads": ["input.message"], "writes": ["mood"], "max_tokens": 16},
        **ENDS,
    }
    edges = [
        {"from": "department", "to": "mood"},
        {"from": "department", "on_fail": "escalate"},
        {"from": "mood", "to": "done"},
        {"from": "mood", "on_fail": "escalate"},
    ]
    write_pack(root, nodes, edges)
    (root / "prompts" / "mood.txt").write_text("Message: {{ input.message }}\nIs the customer calm or upset?\n")
    (root / "grammars" / "mood.json").write_text(json.dumps(MOOD_SCHEMA))
    return root


MESSAGES = [
    "I was charged twice for one order and nobody answers my emails!",
    "The parcel arrived with a broken lid.",
    "How do I reset my password?",
]


def test_independent_nodes_run_side_by_side_and_commit_in_graph_order(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    pack = load_pack(two_independent_nodes(tmp_path / "p"))
    plain = opened(smol_spec(smollm2_server, "concurrency=2;slots=2;grammar=gbnf"))
    ahead = opened(smol_spec(smollm2_server, "concurrency=2;slots=2;grammar=gbnf;lookahead=1"))
    for i, message in enumerate(MESSAGES):
        one = run_pack(pack, {"message": message}, backend=plain, run_id=f"plain-{i}")
        two = run_pack(pack, {"message": message}, backend=ahead, run_id=f"ahead-{i}")
        assert one.status == two.status == "done", (one.trace.error, two.trace.error)
        assert set(two.output) == set(one.output) == {"department", "mood"}
        assert two.output["mood"] in ("calm", "upset")
        assert [s.node for s in two.trace.steps] == [s.node for s in one.trace.steps] == ["department", "mood", "done"]
        mood = [a for a in two.trace.attempts if a.node == "mood"]
        assert len(mood) == 1 and mood[0].request_id == f"ahead-{i}.mood.1a"  # the call made ahead, used
        assert mood[0].prompt_tokens > 0 and mood[0].completion_tokens > 0


def test_a_sure_first_draw_stands_alone_on_llama_server(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    """`sure:` reads llama-server's logprobs of the first draw: with a floor every token
    clears, the quorum node makes one call and says why."""
    backend = opened(smol_spec(smollm2_server, "concurrency=2;grammar=gbnf"))
    node = department_node(samples=3, agree=2, temperature=0.7, sure=1e-9)
    root = write_pack(tmp_path / "p", {"department": node, **ENDS}, ONE_NODE_EDGES)
    result = run_pack(load_pack(root), {"message": "I was charged twice for one order."}, backend=backend)
    assert result.trace.path == ["department", "done"], result.trace.steps[0].reason
    assert len([a for a in result.trace.attempts if a.node == "department"]) == 1
    (note,) = [n for n in result.trace.steps[0].notes if n.startswith("settled by its first draw")]
    assert "(sure: 1e-09)" in note
