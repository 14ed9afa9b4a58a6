"""The openai: client's slots and prompt cache, against the fault-injecting server (a real
HTTP server on loopback): waiting for one of `concurrency` slots is bounded by
`queue_wait` and does not eat the call's `deadline`; `slots` pins every call of a run to
one server slot; the cached share of a prompt is read from either way a server says it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from runtime.backends._retry import Failure
from runtime.backends._sse import read_stream
from runtime.backends.openai import EndpointRejected, EndpointUnavailable, cached_tokens
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener
from tests.support.packs import rating_call as call


def test_waiting_for_a_slot_does_not_eat_the_calls_deadline(opened: Opener, fault: FaultServer) -> None:
    """Three calls through one slot, each about 0.6 s: the third waits about 1.2 s for the
    slot, more than its deadline of 1 s, and still gets its answer."""
    fault.configure(latency=0.6)
    backend = opened(fault.spec("concurrency=1;deadline=1;attempts=1"))
    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(lambda i: backend.complete(call(attempt=i)), range(1, 4)))
    assert [r.text != "" for r in replies] == [True, True, True]
    assert fault.max_in_flight == 1 and fault.count("ok") == 3


def test_a_call_that_waits_past_queue_wait_says_which_settings_to_change(opened: Opener, fault: FaultServer) -> None:
    fault.configure(latency=1.5)
    backend = opened(fault.spec("concurrency=1;queue_wait=0.2"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(lambda i: _outcome(backend, i), range(1, 3)))
    failed = [g for g in got if isinstance(g, EndpointUnavailable)]
    assert len(failed) == 1 and fault.count("ok") == 1
    message = str(failed[0])
    assert "waited 0.2s (queue_wait) for a slot of concurrency=1" in message
    assert "raise the endpoint's concurrency" in message and "lower the eval's concurrency" in message


def _outcome(backend: object, attempt: int) -> object:
    try:
        return backend.complete(call(attempt=attempt))  # type: ignore[attr-defined]
    except EndpointUnavailable as exc:
        return exc


def test_slots_pin_every_call_of_a_run_to_one_server_slot(opened: Opener, fault: FaultServer) -> None:
    backend = opened(fault.spec("slots=4"))
    for attempt in (1, 2, 3):
        backend.complete(call(attempt=attempt))
    bodies = [r.body for r in fault.completions()]
    assert {b["id_slot"] for b in bodies} == {bodies[0]["id_slot"]} and 0 <= bodies[0]["id_slot"] < 4
    assert all(b["cache_prompt"] is True for b in bodies)
    plain = opened(fault.spec())
    plain.complete(call())
    assert "id_slot" not in fault.completions()[-1].body  # off unless asked for


@pytest.mark.parametrize(
    ("usage", "timings", "expected"),
    [
        ({"prompt_tokens": 90, "prompt_tokens_details": {"cached_tokens": 64}}, None, 64),  # vLLM, OpenAI
        ({"prompt_tokens": 90}, {"prompt_n": 26, "cache_n": 64}, 64),  # llama-server
        ({"prompt_tokens": 90}, None, None),  # the server does not say
    ],
)
def test_the_cached_share_of_a_prompt_is_read_from_usage_or_timings(
    usage: dict[str, object], timings: dict[str, object] | None, expected: int | None
) -> None:
    assert cached_tokens(usage, timings) == expected


def test_an_answer_past_max_answer_bytes_is_cut_off_and_not_retried(opened: Opener, fault: FaultServer) -> None:
    fault.configure(answer="x" * 5000)  # 1,250 events of 4 characters: about 190 kB of stream
    backend = opened(fault.spec("max_answer_bytes=16384"))
    with pytest.raises(EndpointRejected, match=r"the answer passed 16384 bytes \(the endpoint's max_answer_bytes\)"):
        backend.complete(call())
    assert len(fault.completions()) == 1  # not retried
    fault.configure(answer="x" * 40)
    assert backend.complete(call(attempt=2)).text == "x" * 40


def test_a_stream_without_line_breaks_is_cut_off_at_max_answer_bytes() -> None:
    """A server that never ends a line (a fault a real server cannot be made to produce
    on demand, so a response built by hand): the reader holds at most max_answer_bytes."""
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"data: " + b"x" * 50_000)
    got = read_stream(response, call(), deadline_at=float("inf"), max_bytes=4096)
    assert isinstance(got, Failure) and got.kind == "rejected" and "passed 4096 bytes" in got.message
