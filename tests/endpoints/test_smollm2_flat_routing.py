"""Against a real llama-server with SmolLM2-135M-Instruct: the flat routing benchmark pack
(benchmarks/packs/helpdesk_routing_flat) answers both labels in one call, and its
`assert` holds back a sub-issue of another department: the pair is never committed and
the message waits for a person at `review`.

The messages are five cases the assert held in the benchmark's run of this pack
(benchmarks/results/real_models_flat_held.jsonl, whose rows record why), and two it
routed. What must hold whatever the model answers: every committed pair is one the
label map allows, a held message reached `review` with nothing of the route committed,
and the assert held back at least one of them, as in the benchmark run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runtime import load_pack, run_pack
from tests.support.model_servers import Opener, RecordingBackend, RunningServer
from tests.support.smollm2_packs import smol_spec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "benchmarks" / "packs" / "helpdesk_routing_flat"
LABELS = REPO / "benchmarks" / "packs" / "helpdesk_routing" / "labels" / "subissues.yaml"
HELD = ["hd-14", "hd-16", "hd-17", "hd-19", "hd-27"]  # assert-held in the benchmark's written arm
ROUTED = ["hd-01", "hd-02"]


def test_a_pair_the_label_map_forbids_goes_to_review_uncommitted(smollm2_server: RunningServer, opened: Opener) -> None:
    pack = load_pack(PACK)
    allowed = yaml.safe_load(LABELS.read_text())
    cases = {c["id"]: c for c in map(json.loads, (PACK / "evalset.jsonl").read_text().splitlines())}
    backend = RecordingBackend(opened(smol_spec(smollm2_server, "concurrency=1;grammar=gbnf;prefill=true")))
    held_by_assert = 0
    for case_id in HELD + ROUTED:
        result = run_pack(pack, cases[case_id]["input"], backend=backend, case_id=case_id)
        rejected = [a for a in result.trace.attempts if not a.ok]
        if result.status == "done":
            assert result.output["subissue"] in allowed[result.output["department"]], (case_id, result.output)
            assert not rejected, case_id
            continue
        assert (result.status, result.waiting_at) == ("waiting", "review"), (case_id, result.status)
        assert "department" not in result.state and "subissue" not in result.state, (case_id, result.state)
        if rejected:
            assert [a.category for a in rejected] == ["assert"], case_id  # no re-draws: resamples 0
            held_by_assert += 1
        else:  # held by the confidence gate instead: the pair itself was allowed
            step = result.trace.steps[0]
            assert step.confidence and step.confidence["p"] < 0.41, (case_id, step.confidence)
    assert held_by_assert >= 1, "the assert held back none of the messages it held in the benchmark run"
    assert len(backend.calls) == len(HELD + ROUTED)  # one call a message, a held one included
