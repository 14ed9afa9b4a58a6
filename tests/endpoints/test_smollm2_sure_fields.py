"""Against a real llama-server with SmolLM2-135M-Instruct: `sure_fields` reads the
server's logprobs of the first draw field by field, and the later draws' grammar holds
the unsettled field only (runtime.nodes.sure_fields).

P is set between the two fields' least likely tokens as the server gave them on a first,
greedy call (a department from an enum, a free-text topic), so one field is settled and
the other is not; the node then draws greedily again."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, run_pack
from runtime.nodes.sure_fields import field_least_p
from tests.support.model_servers import Opener, RecordingBackend, RunningServer
from tests.support.smollm2_packs import DEPARTMENTS, ENDS, ONE_NODE_EDGES, department_node, smol_spec, write_pack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SCHEMA = {
    "type": "object",
    "properties": {
        "department": {"type": "string", "enum": DEPARTMENTS},
        "topic": {"type": "string", "maxLength": 24},
    },
    "required": ["department", "topic"],
    "additionalProperties": False,
}
MESSAGES = ["I was charged twice for one order.", "My parcel never arrived.", "The app crashes on start."]


def pack(root: Path, **node: Any) -> Path:
    spec = department_node(writes=["department", "topic"], samples=3, agree=2, temperature=0.0, **node)
    write_pack(root, {"department": spec, **ENDS}, ONE_NODE_EDGES)
    (root / "grammars" / "department.json").write_text(json.dumps(SCHEMA))
    (root / "prompts" / "department.txt").write_text("Message: {{ input.message }}\nDepartment and a short topic?\n")
    return root


@pytest.mark.parametrize("prefill", ["false", "true"])
def test_later_draws_ask_llama_server_for_the_unsure_field_only(
    smollm2_server: RunningServer, opened: Opener, tmp_path: Path, prefill: str
) -> None:
    """The field the first draw was surer of is settled, the other asked for again. With
    `prefill=true` the settled value goes out as the answer's start and the model writes
    the other field after it (ModelCall.given); without, the other field alone."""
    backend = RecordingBackend(opened(smol_spec(smollm2_server, f"concurrency=1;grammar=gbnf;prefill={prefill}")))
    # A first greedy call per message, with logprobs (sure=1 asks for them and never settles).
    probe = load_pack(pack(tmp_path / "probe", sure=1.0, sure_fields=True))
    chosen: tuple[str, float, dict[str, Any], str, str] | None = None
    for message in MESSAGES:
        backend.calls.clear()
        run_pack(probe, {"message": message}, backend=backend)
        call, reply = backend.calls[0]
        assert call.logprobs and reply.logprobs
        least = field_least_p(reply.text, reply.logprobs)
        assert least is not None and set(least) == {"department", "topic"}, reply.text
        sure, unsure = sorted(least, key=least.__getitem__, reverse=True)
        if least[sure] > 2 * least[unsure]:  # room for a P between them
            chosen = (message, math.sqrt(least[sure] * least[unsure]), json.loads(reply.text), sure, unsure)
            break
    if chosen is None:
        pytest.fail(f"no message where SmolLM2 was twice as sure of one field as of the other: {least}")
    message, p, first, sure, unsure = chosen

    backend.calls.clear()
    result = run_pack(load_pack(pack(tmp_path / "p", sure=p, sure_fields=True)), {"message": message}, backend=backend)
    assert result.status == "done", result.trace.steps[0].reason
    schemas = [call.schema for call, _ in backend.calls]
    assert schemas[0] is not None and set(schemas[0]["properties"]) == {"department", "topic"}
    assert len(schemas) >= 2 and all(s is not None and set(s["properties"]) == {unsure} for s in schemas[1:])
    settled = "{" + json.dumps(sure) + ":" + json.dumps(first[sure], ensure_ascii=False) + "," + json.dumps(unsure)
    for _, reply in backend.calls[1:]:  # only the unsure field decoded
        assert reply.text.startswith(settled) if prefill == "true" else f'"{sure}"' not in reply.text, reply.text
    assert result.output[sure] == first[sure]  # settled by the first draw
    assert any(n.startswith(f"later draws ask for {unsure} only: {sure} settled") for n in result.trace.steps[0].notes)
    # The prompt of the later draws is the first's: the server read it from its cache.
    # With prefill the written start of the answer is read too (no more tokens than it
    # has characters), unless the first draw wrote the same start itself.
    written = len(settled) if prefill == "true" else 0
    later = [reply for _, reply in backend.calls[1:]]
    assert all(r.cached_tokens and r.prompt_tokens - r.cached_tokens <= 4 + written for r in later), [
        (r.prompt_tokens, r.cached_tokens, written) for r in later
    ]
