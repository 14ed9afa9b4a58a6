"""Contract tests against llama-cpp-python's own server (`python -m llama_cpp.server`),
installed into its own virtual environment from PyPI and serving the tiny stories260K
model on loopback, started with --interrupt_requests False.

This server honours only {"type": "json_object", "schema": ...} and does not enforce
minimum/maximum: verification and the retry ladder must hold those, and nothing that
breaks them may be committed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from runtime import RunResult, load_pack, run_pack
from runtime.backends import ModelCall
from runtime.backends.base import estimate_tokens
from runtime.backends.openai import EndpointRejected, EndpointUnavailable
from runtime.errors import Cancelled
from tests.support.model_servers import Opener, RunningServer, assert_committed_answers_validate, run_chain, spec
from tests.support.packs import RATING_SCHEMA, write_chain_pack

# The first test here installs llama-cpp-python when var/cache/ has none (about 5 minutes).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

MODE = "grammar=json_object;request_id=uuid"


def test_it_is_refused_with_a_readable_request_id_and_served_with_a_uuid(
    python_server: RunningServer, opened: Opener
) -> None:
    # starlette-context's RequestIdPlugin answers an empty 400 to a non-UUID X-Request-ID.
    call = ModelCall("rid", "rate", 1, [{"role": "user", "content": "Rate."}], RATING_SCHEMA, max_tokens=256)
    with pytest.raises(EndpointRejected, match="HTTP 400"):
        opened(spec(python_server, "grammar=json_object")).complete(call)
    assert opened(spec(python_server, MODE)).complete(call).finish_reason == "stop"


UNBOUNDED = {**RATING_SCHEMA, "properties": {**RATING_SCHEMA["properties"], "stars": {"type": "integer"}}}


def test_it_runs_a_constrained_pack_end_to_end(python_server: RunningServer, opened: Opener, tmp_path: Path) -> None:
    result, _ = run_chain(opened, spec(python_server, MODE), tmp_path, nodes=2, schema=UNBOUNDED)
    assert result.status == "done", result.trace.error
    assert set(result.output) == {"n1_mood", "n1_stars", "n2_mood", "n2_stars"}


def test_it_never_commits_what_the_server_accepts_but_does_not_enforce(
    python_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    # The server takes the schema but lets any integer through (observed at temperature 1:
    # -30, 0, -5000, ..., never 1..3; greedy: -30). Verification rejects each one, the ladder
    # re-samples (the feedback re-sample is told "must be >= 1"), then the node fails.
    result, _ = run_chain(opened, spec(python_server, MODE), tmp_path, nodes=1)
    rejected = [a for a in result.trace.attempts if not a.ok]
    assert rejected, "expected the server to let an out-of-range answer through"
    assert {a.category for a in rejected} <= {"schema", "parse", "truncated"}
    assert any(a.reason and a.reason.startswith(("n1_stars must be >= 1", "n1_stars must be <= 3")) for a in rejected)
    if result.status == "done":
        assert 1 <= result.output["n1_stars"] <= 3
    else:
        assert result.state == {} and result.trace.commits() == []


def test_it_streams_and_counts_tokens_itself_when_the_server_sends_no_usage(
    python_server: RunningServer, opened: Opener
) -> None:
    # This server ignores stream_options.include_usage: the client counts content deltas
    # (one per token on llama.cpp-based servers) and estimates the prompt at 4 chars a token.
    messages = [{"role": "user", "content": "Rate the story."}]
    reply = opened(spec(python_server, MODE + ";price_in=1;price_out=1")).complete(
        ModelCall("usage", "rate", 1, messages, UNBOUNDED, max_tokens=256)
    )
    assert json.loads(reply.text)["mood"] in ("happy", "sad", "calm")
    assert reply.prompt_tokens == estimate_tokens("Rate the story.") and reply.completion_tokens > 5
    assert reply.ttft_s is not None and reply.ttft_s < reply.latency_s
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens + reply.completion_tokens) / 1e6)


def test_it_serves_two_runs_at_once_one_request_at_a_time(
    python_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    pack_dir = write_chain_pack(tmp_path / "pack", nodes=1, schema=UNBOUNDED)
    pack = load_pack(pack_dir)
    backend = opened(spec(python_server, MODE + ";concurrency=2"))
    results: list[RunResult] = []
    threads = [
        threading.Thread(
            target=lambda i=i: results.append(run_pack(pack, {"story": f"Ben saw bird number {i}."}, backend=backend))
        )
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        assert_committed_answers_validate(result, pack_dir)
    assert [r.status for r in results] == ["done", "done"]


def test_it_cancels_a_stream_and_the_server_stops_generating(python_server: RunningServer, opened: Opener) -> None:
    backend = opened(spec(python_server, MODE))
    disconnects_before = python_server.log_tail(10**7).count("Disconnected from client")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(Cancelled):
        backend.complete(
            ModelCall(
                "cancel",
                "story",
                1,
                [{"role": "user", "content": "Tell a long story."}],
                None,
                max_tokens=1500,
                cancel=cancel,
            )
        )
    # The server serves one request at a time: the next call is answered only once the
    # cancelled generation (about 6 s of it, uncancelled) has stopped.
    reply = backend.complete(
        ModelCall("after", "rate", 1, [{"role": "user", "content": "Rate the story."}], UNBOUNDED, max_tokens=256)
    )
    assert reply.finish_reason == "stop"
    assert python_server.log_tail(10**7).count("Disconnected from client") > disconnects_before


def test_it_retries_finish_reason_length_as_a_truncation(
    python_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    result, _ = run_chain(opened, spec(python_server, MODE), tmp_path, nodes=1, node_options={"max_tokens": 8})
    assert result.status == "failed" and result.state == {}
    assert [a.category for a in result.trace.attempts] == ["truncated"] * 4


def test_it_reports_the_json_schema_form_this_server_refuses(python_server: RunningServer, opened: Opener) -> None:
    # HTTP 500 is a server error, so it is retried, then reported with the server's status.
    with pytest.raises(EndpointUnavailable, match="HTTP 500"):
        opened(spec(python_server, "grammar=json_schema;request_id=uuid;attempts=2;backoff=0.05")).complete(
            ModelCall("js", "rate", 1, [{"role": "user", "content": "Rate the story."}], RATING_SCHEMA, max_tokens=64)
        )
