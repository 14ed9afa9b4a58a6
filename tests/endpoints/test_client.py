"""The openai: client against the fault-injecting server: one behaviour per test."""

from __future__ import annotations

import itertools
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runtime import load_pack, run_pack
from runtime.backends.openai import EndpointRejected, EndpointUnavailable
from runtime.errors import BackendError, BadSpec, Cancelled
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener
from tests.support.packs import RATING_SCHEMA, rating_call, write_chain_pack
from tests.support.waiting import wait_until

FAST = "backoff=0.02"


call = rating_call


def gaps(server: FaultServer) -> list[float]:
    starts = [r.started for r in server.completions()]
    return [b - a for a, b in itertools.pairwise(starts)]


def test_it_streams_an_answer_with_usage_latency_and_cost(opened: Opener, fault: FaultServer) -> None:
    backend = opened(fault.spec("price_in=0.5;price_out=2"))
    reply = backend.complete(call())
    assert json.loads(reply.text) == {"mood": "happy", "stars": 1}
    body = fault.completions()[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 0.5 + reply.completion_tokens * 2) / 1e6)
    assert reply.ttft_s is not None and 0 < reply.ttft_s <= reply.latency_s
    assert reply.finish_reason == "stop"


def test_it_sends_the_request_id_on_every_try(opened: Opener, fault: FaultServer) -> None:
    fault.configure(script=["500", "truncate"])
    opened(fault.spec(FAST)).complete(call(attempt=3))
    assert [r.request_id for r in fault.completions()] == ["run7.rate.3"] * 3


def test_it_marks_the_reasoning_stage_in_the_request_id(opened: Opener, fault: FaultServer) -> None:
    opened(fault.spec()).complete(call(schema=None, purpose="reasoning"))
    assert fault.completions()[0].request_id == "run7.rate.1r"


@pytest.mark.parametrize("status", ["503", "429"])
def test_it_never_retries_sooner_than_retry_after(opened: Opener, fault: FaultServer, status: str) -> None:
    fault.configure(script=[status, status], retry_after="0.4")
    reply = opened(fault.spec(FAST)).complete(call())
    assert json.loads(reply.text)["mood"] == "happy"
    assert [r.outcome for r in fault.completions()] == [status, status, "ok"]
    assert all(gap >= 0.4 for gap in gaps(fault))


def test_it_rides_out_a_429_storm_without_spending_attempts(opened: Opener, fault: FaultServer) -> None:
    fault.configure(storm_for=0.6, retry_after="0.2")
    opened(fault.spec("attempts=1;" + FAST)).complete(call())
    assert fault.count("429") >= 2 and fault.count("ok") == 1
    assert all(gap >= 0.2 for gap in gaps(fault))


@pytest.mark.parametrize("plan", ["500", "502", "504", "truncate", "no_done", "done_early", "inband"])
def test_it_backs_off_and_retries_server_failures(opened: Opener, fault: FaultServer, plan: str) -> None:
    fault.configure(script=[plan, plan])
    reply = opened(fault.spec("backoff=0.1")).complete(call())
    assert json.loads(reply.text)["stars"] == 1
    first, second = gaps(fault)
    assert first >= 0.05 and second >= 0.1  # equal jitter: at least half of 0.1, then of 0.2


def test_it_gives_up_after_its_attempts_with_a_clear_message(opened: Opener, fault: FaultServer) -> None:
    fault.configure(script=["502"] * 10)
    with pytest.raises(EndpointUnavailable, match=r"gave up after 3 tries .* last: server: HTTP 502: internal error"):
        opened(fault.spec("attempts=3;" + FAST)).complete(call())
    assert len(fault.completions()) == 3


def test_it_gives_up_when_the_deadline_is_spent(opened: Opener, fault: FaultServer) -> None:
    fault.configure(loading_for=60)
    # The model loads for 60 s; the answer names the 1.5 s deadline as spent (how soon it
    # gives up is the deadline's own arithmetic, not a clock read here).
    with pytest.raises(
        EndpointUnavailable, match=r"deadline of 1.5s exhausted .* last: loading: HTTP 503: Loading model"
    ):
        opened(fault.spec("deadline=1.5")).complete(call())


def test_it_waits_for_a_loading_model_within_the_deadline(opened: Opener, fault: FaultServer) -> None:
    fault.configure(loading_for=1.2)
    reply = opened(fault.spec("attempts=1;deadline=10")).complete(call())
    assert reply.text and fault.count("loading") >= 1 and fault.count("ok") == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_it_fails_at_once_on_a_4xx_with_the_servers_message(opened: Opener, fault: FaultServer, status: int) -> None:
    fault.configure(script=[{"status": status, "message": f"the server says no ({status})"}])
    with pytest.raises(EndpointRejected, match=rf"HTTP {status}: the server says no \({status}\)") as info:
        opened(fault.spec()).complete(call())
    assert info.value.status == status and len(fault.completions()) == 1


def test_it_fails_at_once_on_an_in_band_4xx_error(opened: Opener, fault: FaultServer) -> None:
    fault.configure(script=["inband_400"])
    with pytest.raises(EndpointRejected, match="in-band error: prompt is too long"):
        opened(fault.spec()).complete(call())
    assert len(fault.completions()) == 1


def test_it_retries_a_first_token_slower_than_its_timeout(opened: Opener, fault: FaultServer) -> None:
    fault.configure(first_token_delay=0.5)
    with pytest.raises(EndpointUnavailable, match="timeout"):
        opened(fault.spec("timeout=0.15;attempts=2;" + FAST)).complete(call())
    assert len(fault.completions()) == 2
    reply = opened(fault.spec("timeout=5")).complete(call())
    assert reply.ttft_s is not None and reply.ttft_s >= 0.5


def test_it_never_has_more_calls_in_flight_than_its_cap(opened: Opener, fault: FaultServer) -> None:
    fault.configure(latency=0.05)
    backend = opened(fault.spec("concurrency=3"))
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda i: backend.complete(call(attempt=i)), range(24)))
    assert fault.max_in_flight == 3 and fault.count("ok") == 24


def test_it_shares_the_cap_between_backends_opened_on_one_endpoint(opened: Opener, fault: FaultServer) -> None:
    fault.configure(latency=0.05)
    first, second = opened(fault.spec("concurrency=2")), opened(fault.spec("concurrency=2"))
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: (first if i % 2 else second).complete(call(attempt=i)), range(16)))
    assert fault.max_in_flight == 2


def test_it_closes_the_stream_when_the_run_is_cancelled(opened: Opener, fault: FaultServer) -> None:
    fault.configure(answer="x" * 400, token_delay=0.02)  # 100 chunks: about 2 s
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(Cancelled):
        opened(fault.spec()).complete(call(cancel=cancel))
    # Closed early: the server saw the client leave mid-stream, not a finished answer.
    wait_until(
        lambda: [c.outcome for c in fault.completions()] == ["disconnected"],
        timeout=10,
        message=lambda: f"the server saw {[c.outcome for c in fault.completions()]}",
    )


def test_it_stops_waiting_to_retry_when_cancelled(opened: Opener, fault: FaultServer) -> None:
    fault.configure(script=["503"], retry_after="30")
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(Cancelled):
        opened(fault.spec()).complete(call(cancel=cancel))
    # Given up during the 30 s wait: the retry was never sent. (How fast: benchmarks/cancel_latency.py.)
    assert [c.outcome for c in fault.completions()] == ["503"]


@pytest.mark.parametrize(
    "mode, key",
    [
        ("json_schema", "response_format"),
        ("json_object", "response_format"),
        ("guided_json", "guided_json"),
        ("gbnf", "grammar"),
    ],
)
def test_it_sends_the_schema_in_the_endpoints_grammar_mode(
    opened: Opener, fault: FaultServer, mode: str, key: str
) -> None:
    opened(fault.spec(f"grammar={mode}")).complete(call())
    body = fault.completions()[0].body
    expected = {
        "json_schema": {"type": "json_schema", "json_schema": {"name": "rate", "schema": RATING_SCHEMA}},
        "json_object": {"type": "json_object", "schema": RATING_SCHEMA},
        "guided_json": RATING_SCHEMA,
    }.get(mode)
    if expected is not None:
        assert body[key] == expected
    else:
        assert body["grammar"].startswith("root ::= ") and '"\\"happy\\""' in body["grammar"]


def test_it_sends_no_grammar_with_mode_none_or_for_the_reasoning_stage(opened: Opener, fault: FaultServer) -> None:
    opened(fault.spec("grammar=none")).complete(call())
    opened(fault.spec()).complete(call(schema=None, purpose="reasoning"))
    for record in fault.completions():
        assert not {"response_format", "guided_json", "grammar"} & set(record.body)


def test_it_counts_reasoning_but_never_returns_it_as_the_answer(opened: Opener, fault: FaultServer) -> None:
    fault.configure(reasoning="I think the story is happy.")
    reply = opened(fault.spec("price_out=1")).complete(call())
    assert json.loads(reply.text) == {"mood": "happy", "stars": 1}
    assert reply.reasoning_text == "I think the story is happy."
    assert reply.reasoning_tokens == 7 and reply.completion_tokens == 8  # 4-char chunks
    assert reply.cost_usd == pytest.approx((reply.completion_tokens + reply.reasoning_tokens) / 1e6)


def test_it_estimates_usage_when_the_server_sends_none(opened: Opener, fault: FaultServer) -> None:
    fault.configure(usage=False)
    reply = opened(fault.spec("usage=false")).complete(call())
    assert "stream_options" not in fault.completions()[0].body
    assert reply.prompt_tokens > 0 and reply.completion_tokens == 8


def test_it_sends_the_key_from_the_named_environment_variable(
    opened: Opener, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_LLM_AUTH", "pf-test-credential-1234")
    opened(fault.spec("key_env=ACME_LLM_AUTH")).complete(call())
    assert fault.completions()[0].headers["authorization"] == "Bearer pf-test-credential-1234"


def test_it_refuses_a_key_env_that_is_not_set(opened: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACME_LLM_AUTH", raising=False)
    with pytest.raises(BadSpec, match=r"environment variable ACME_LLM_AUTH .* is not set"):
        opened("openai:http://127.0.0.1:9/v1#m;key_env=ACME_LLM_AUTH")


def test_it_reports_a_server_that_refuses_connections(opened: Opener, fault: FaultServer) -> None:
    url = fault.base_url
    fault.stop()
    with pytest.raises(EndpointUnavailable, match="connection: ConnectError"):
        opened(f"openai:{url}#m;attempts=2;{FAST}").complete(call())


def test_it_fails_a_run_resumably_when_the_endpoint_gives_up(
    opened: Opener, fault: FaultServer, tmp_path: Path
) -> None:
    fault.configure(script=[{"status": 401, "message": "invalid API key"}])
    pack = load_pack(write_chain_pack(tmp_path / "pack", nodes=2))
    result = run_pack(pack, {"story": "A cat."}, backend=opened(fault.spec()))
    assert result.status == "failed" and result.state == {}
    assert "HTTP 401: invalid API key" in (result.trace.error or "")


def test_it_hands_finish_reason_length_to_the_walker_as_a_truncation(
    opened: Opener, fault: FaultServer, tmp_path: Path
) -> None:
    fault.configure(finish_reason="length", answer='{"n1_mood": "ha')
    pack = load_pack(write_chain_pack(tmp_path / "pack", nodes=1))
    result = run_pack(pack, {"story": "A cat."}, backend=opened(fault.spec()))
    assert result.status == "failed" and result.state == {}
    assert [a.category for a in result.trace.attempts] == ["truncated"] * 4  # the whole ladder


def test_it_records_every_request_id_in_the_trace(opened: Opener, fault: FaultServer, tmp_path: Path) -> None:
    fault.configure(script=["503"], retry_after="0.05")
    pack = load_pack(write_chain_pack(tmp_path / "pack", nodes=3))
    result = run_pack(pack, {"story": "A cat."}, backend=opened(fault.spec()), run_id="r1")
    assert result.status == "done"
    assert [a.request_id for a in result.trace.attempts] == ["r1.n1.1", "r1.n2.1", "r1.n3.1"]
    assert [r.request_id for r in fault.completions()] == ["r1.n1.1", "r1.n1.1", "r1.n2.1", "r1.n3.1"]


def test_it_takes_an_answer_from_a_server_that_does_not_stream() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"content": '{"mood": "sad", "stars": 2}'}}
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 5},
            },
        )

    from runtime.backends.openai import OpenAIBackend, parse_spec

    spec = "openai:http://model.test/v1#m"
    backend = OpenAIBackend(spec, parse_spec(spec), transport=httpx.MockTransport(handler))
    reply = backend.complete(call())
    backend.close()
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ('{"mood": "sad", "stars": 2}', 11, 5)


def test_it_raises_backend_errors_from_the_runtime_tree(fault: FaultServer) -> None:
    assert issubclass(EndpointRejected, BackendError) and issubclass(EndpointUnavailable, BackendError)
