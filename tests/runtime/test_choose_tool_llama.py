"""choose_tool against a real model server: packs/calculator on llama-server serving
SmolLM2-135M-Instruct (tests/support/model_servers.py). A 135M model is not expected to
be a good calculator; what is held is the node's contract: every choice went out with
the grammar built from the tools' schemas, every run ends with an answer (`done`) or an
explicit escalation (waiting at the human `review` node), and within its budget (at
most `max_calls` tool calls per visit, and at most `max_calls + 1` valid choices plus
the ladder's re-asks). Slow: it starts llama-server (PACKFORGE_BUILD_CACHE points at a
built one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import load_pack, load_tools, open_backend, run_pack
from tests.support import model_servers
from tests.support.model_servers import RunningServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PACK = Path(__file__).resolve().parents[2] / "packs" / "calculator"
CASES = ("c-01", "c-03", "c-05", "c-07", "c-11", "c-14")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    yield from model_servers.serve_smollm2(tmp_path_factory)


def test_it_ends_every_run_with_an_answer_or_an_escalation_within_budget(smollm2: RunningServer) -> None:
    tools = load_tools(f"{PACK / 'tools.py'}:registry")
    assert tools is not None
    pack = load_pack(PACK, tools=set(tools))
    pick = pack.nodes["pick"]
    ladder = pack.retry_for(pick).ladder_attempts
    recording = model_servers.RecordingBackend(
        open_backend(f"openai:{smollm2.base_url}#smollm2;attempts=1;timeout=600")
    )
    cases = {c.id: c for c in pack.cases}
    try:
        for case_id in CASES:
            case = cases[case_id]
            before = len(recording.calls)
            result = run_pack(pack, case.input, backend=recording, tools=tools, case_id=case.id)
            made = recording.calls[before:]
            assert (result.status, result.waiting_at) in (("done", None), ("waiting", "review")), (
                case_id,
                result.status,
                result.trace.error,
            )
            if result.status == "done":
                assert isinstance(result.output.get("answer"), (int, float))
            stats = result.trace.tool_stats
            assert stats["tool_calls"] <= pick.config.max_calls
            choices = [c for c, _ in made if c.node == "pick"]
            assert len(choices) == stats["model_calls"]
            assert len(choices) <= (pick.config.max_calls + 1) * ladder
            assert all(c.schema is not None and "oneOf" in c.schema for c in choices)
    finally:
        recording.close()
