"""Per-token logprobs from an openai: endpoint (for confidence gates), against the
fault-injecting server on loopback; and `packforge endpoints check` saying whether an
endpoint returns them."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from runtime.backends import ModelCall
from runtime.backends._sse import StreamResult, _take
from runtime.endpoints import check_endpoint
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener
from tests.support.packs import RATING_SCHEMA
from tests.support.runtime_packs import pf


def call(**kw: Any) -> ModelCall:
    return ModelCall(
        run_id="run7",
        node="rate",
        attempt=1,
        schema=RATING_SCHEMA,
        messages=[{"role": "user", "content": "Rate the story."}],
        **kw,
    )


@pytest.mark.parametrize("json_answer", [False, True], ids=["streamed", "one-json-document"])
def test_it_asks_for_logprobs_and_reads_them(opened: Opener, fault: FaultServer, json_answer: bool) -> None:
    fault.configure(json_answer=json_answer, token_logprob=-0.25)
    reply = opened(fault.spec()).complete(call(logprobs=True))
    body = fault.completions()[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 20  # the most OpenAI and vLLM accept
    assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == reply.text
    first = reply.logprobs[0]
    assert first.logprob == pytest.approx(-0.25)
    assert len(first.top) == 20
    assert first.top[:5] == [(first.token, -0.25), ("~1", -2.25), ("~2", -4.25), ("~3", -6.25), ("~4", -8.25)]


def test_it_asks_for_no_logprobs_unless_the_call_wants_them(opened: Opener, fault: FaultServer) -> None:
    reply = opened(fault.spec()).complete(call())
    body = fault.completions()[0].body
    assert "logprobs" not in body and "top_logprobs" not in body and reply.logprobs is None


def test_it_has_none_from_a_server_that_ignores_the_request(opened: Opener, fault: FaultServer) -> None:
    fault.configure(logprobs=False)
    reply = opened(fault.spec()).complete(call(logprobs=True))
    assert json.loads(reply.text) == {"mood": "happy", "stars": 1} and reply.logprobs is None


def answer_with(entries: list[Any]) -> StreamResult:
    result = StreamResult()
    choice = {"index": 0, "message": {"content": "ab"}, "finish_reason": "stop", "logprobs": {"content": entries}}
    _take({"choices": [choice]}, result)
    return result


def test_it_drops_logprobs_with_a_malformed_entry() -> None:
    result = answer_with([{"token": "a", "logprob": -0.1, "top_logprobs": []}, {"token": "b", "logprob": "high"}])
    assert result.text == "ab" and result.token_logprobs is None


def test_it_reads_a_null_logprob_as_minus_infinity() -> None:
    # llama-server writes the log of a zero probability as null.
    result = answer_with([{"token": "ab", "logprob": None, "top_logprobs": [{"token": "x", "logprob": -0.1}]}])
    assert result.token_logprobs is not None
    assert result.token_logprobs[0].logprob == -math.inf and result.token_logprobs[0].top == [("x", -0.1)]


def test_it_reports_an_endpoint_that_returns_logprobs(fault: FaultServer) -> None:
    result = check_endpoint(fault.spec())
    assert result.ok and result.logprobs is True and "p('zqx-amber')" in result.logprobs_note
    assert [r.body.get("logprobs") for r in fault.completions()] == [None, True]
    proc = pf("endpoints", "check", fault.spec(), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["logprobs"] is True


def test_it_reports_an_endpoint_without_logprobs_and_still_passes_it(fault: FaultServer) -> None:
    fault.configure(logprobs=False)
    proc = pf("endpoints", "check", fault.spec())
    assert proc.returncode == 0, proc.stdout
    assert (
        "logprobs   no (the answer came without them) — without them confidence gates fall back to agreement"
        in proc.stdout
    )
    assert "result     OK" in proc.stdout


def test_it_reports_an_endpoint_that_refuses_a_request_for_logprobs(fault: FaultServer) -> None:
    fault.configure(script=["ok", {"status": 400, "message": "logprobs is not supported"}])
    result = check_endpoint(fault.spec("backoff=0.01"))
    assert result.ok and result.logprobs is False and "logprobs is not supported" in result.logprobs_note
    assert "logprobs   no (the request asking for them failed" in "\n".join(result.lines())
