"""Against a real llama-server with SmolLM2-135M-Instruct: the gated extraction benchmark
pack (benchmarks/packs/shipping_details_gated) answers five free-text fields in one call,
measures each field's own token probability from the reply's logprobs, and sends an
answer whose least sure field is below the floor to `escalate` with nothing committed.

The emails are three cases whose least sure field had p below 1e-4 in the benchmark's
first run of this pack (benchmarks/results/real_models_extraction_gated_first.jsonl) and
two above 0.5. What must hold whatever the model answers: every field is measured from
logprobs (`basis: raw`), the step's p is its least sure field's, a case is committed
exactly when that p reaches the floor, one call a case, and the gate held at least one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import load_pack, run_pack
from tests.support.model_servers import Opener, RecordingBackend, RunningServer
from tests.support.smollm2_packs import smol_spec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PACK = Path(__file__).resolve().parents[2] / "benchmarks" / "packs" / "shipping_details_gated"
FIELDS = ["name", "street", "city", "postcode", "country"]
UNSURE = ["sd-05", "sd-28", "sd-49"]
SURE = ["sd-51", "sd-04"]


def test_the_least_sure_free_text_field_decides(smollm2_server: RunningServer, opened: Opener) -> None:
    pack = load_pack(PACK)
    gate = pack.nodes["extract"].confidence
    assert gate is not None
    cases = {c["id"]: c for c in map(json.loads, (PACK / "evalset.jsonl").read_text().splitlines())}
    backend = RecordingBackend(opened(smol_spec(smollm2_server, "concurrency=1;grammar=gbnf;prefill=true")))
    held = 0
    for case_id in UNSURE + SURE:
        result = run_pack(pack, cases[case_id]["input"], backend=backend, case_id=case_id)
        step = result.trace.steps[0]
        measured = step.confidence
        assert measured is not None and measured["source"] == "logprobs" and measured["basis"] == "raw", case_id
        assert set(measured["fields"]) == set(FIELDS) and measured["p"] == min(measured["fields"].values())
        assert measured["fields"][measured["field"]] == measured["p"], case_id
        if measured["p"] >= gate.min:
            assert result.trace.path == ["extract", "ready"], case_id
            assert {name: result.output[name] for name in FIELDS} == measured["values"], case_id
            continue
        held += 1
        assert result.trace.path == ["extract", "escalate"] and step.status == "unsure", case_id
        assert not any(name in result.state for name in FIELDS), (case_id, result.state)
        assert f"on '{measured['field']}' (logprobs)" in (step.reason or ""), step.reason
    assert held >= 1, "the gate held back none of the emails whose least sure field was below 1e-4 in the benchmark"
    assert len(backend.calls) == len(UNSURE + SURE)  # one call an email, a held one included
