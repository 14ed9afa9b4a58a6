"""Contract tests against llama.cpp's own llama-server, built from the sources vendored in
PyPI's llama-cpp-python sdist and serving the tiny stories260K model on loopback.

The model writes nonsense; under a grammar every committed answer must still validate."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from runtime import RunResult, load_pack, run_pack
from runtime.backends import ModelCall
from runtime.backends._grammar import schema_to_gbnf
from runtime.errors import Cancelled
from tests.support.model_servers import (
    REPO,
    Opener,
    RunningServer,
    assert_committed_answers_validate,
    run_chain,
    spec,
)
from tests.support.packs import GBNF_SCHEMAS, RATING_SCHEMA, write_chain_pack
from tests.support.waiting import wait_until

# The first test here builds llama-server when var/cache/ has none (about 5 minutes).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "gbnf"])
def test_it_runs_a_constrained_pack_end_to_end_in_each_grammar_mode(
    llama_server: RunningServer, opened: Opener, tmp_path: Path, mode: str
) -> None:
    result, _ = run_chain(opened, spec(llama_server, f"grammar={mode}"), tmp_path, nodes=2)
    assert result.status == "done", result.trace.error
    assert set(result.output) == {"n1_mood", "n1_stars", "n2_mood", "n2_stars"}
    assert all(1 <= result.output[k] <= 3 for k in ("n1_stars", "n2_stars"))  # minimum/maximum enforced
    assert [a.request_id for a in result.trace.attempts][:1] == [f"{result.run_id}.n1.1"]


def test_it_streams_and_reports_usage_and_cost(llama_server: RunningServer, opened: Opener) -> None:
    backend = opened(spec(llama_server, "price_in=0.15;price_out=0.6"))
    reply = backend.complete(
        ModelCall("usage", "rate", 1, [{"role": "user", "content": "Rate the story."}], RATING_SCHEMA, max_tokens=256)
    )
    Draft202012Validator(RATING_SCHEMA).validate(json.loads(reply.text))
    assert reply.prompt_tokens > 10 and reply.completion_tokens > 5
    assert reply.ttft_s is not None and reply.ttft_s < reply.latency_s
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 0.15 + reply.completion_tokens * 0.6) / 1e6)


def test_it_serves_two_runs_at_once(llama_server: RunningServer, opened: Opener, tmp_path: Path) -> None:
    pack_dir = write_chain_pack(tmp_path / "pack", nodes=2)
    pack = load_pack(pack_dir)
    backend = opened(spec(llama_server, "concurrency=2"))
    results: list[RunResult] = []
    threads = [
        threading.Thread(
            target=lambda i=i: results.append(run_pack(pack, {"story": f"Tom had a dog number {i}."}, backend=backend))
        )
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results] == ["done", "done"]
    for result in results:
        assert_committed_answers_validate(result, pack_dir)


def test_it_stops_generation_on_the_server_when_cancelled(llama_server: RunningServer, opened: Opener) -> None:
    root = llama_server.base_url.removesuffix("/v1")
    cancels_before = llama_server.log_tail(10**7).count("cancel task")
    cancel = threading.Event()
    call = ModelCall(
        "cancel",
        "story",
        1,
        [{"role": "user", "content": "Tell me a very long story."}],
        None,
        max_tokens=900,
        cancel=cancel,
    )  # about 2 s of generation here, uncancelled
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(Cancelled):
        opened(spec(llama_server)).complete(call)
    wait_until(
        lambda: llama_server.log_tail(10**7).count("cancel task") > cancels_before,  # the server's own word
        timeout=30,
        message="llama-server did not cancel the task when the stream closed",
    )
    # The slot is released once the server has handled the cancel (on a busy machine that
    # can lag the log line): no slot goes on generating the 900 tokens.
    wait_until(
        lambda: not any(slot.get("is_processing") for slot in httpx.get(f"{root}/slots").json()),
        timeout=30,
        message="a llama-server slot kept generating after the cancel",
    )


def test_it_retries_finish_reason_length_as_a_truncation(
    llama_server: RunningServer, opened: Opener, tmp_path: Path
) -> None:
    result, _ = run_chain(opened, spec(llama_server), tmp_path, nodes=1, node_options={"max_tokens": 8})
    assert result.status == "failed" and result.state == {}
    assert [a.category for a in result.trace.attempts] == ["truncated"] * 4


# Strings are bounded: at temperature 1 this model can write an unbounded string past any
# max_tokens, and a cut-off answer says nothing about whether the grammar held.


@pytest.mark.parametrize("schema", GBNF_SCHEMAS, ids=["strings-arrays", "nested-nullable", "refs-anyof"])
def test_it_converts_schemas_to_gbnf_that_llama_server_accepts_and_obeys(
    llama_server: RunningServer, opened: Opener, schema: dict[str, Any]
) -> None:
    assert schema_to_gbnf(schema).ignored == []
    backend = opened(spec(llama_server, "grammar=gbnf"))
    for temperature in (0.0, 1.0):
        reply = backend.complete(
            ModelCall(
                "gbnf",
                "x",
                1,
                [{"role": "user", "content": "Fill in the form."}],
                schema,
                max_tokens=256,
                temperature=temperature,
            )
        )
        assert reply.finish_reason == "stop"
        Draft202012Validator(schema).validate(json.loads(reply.text))


def test_it_checks_the_endpoint_from_the_command_line(llama_server: RunningServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "endpoints", "check", spec(llama_server)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "schema     honoured" in proc.stdout and "result     OK" in proc.stdout
    # The spec uses the default json_schema mode: the check says llama.cpp is better served by gbnf.
    assert "server     llamacpp: llama.cpp's server; add ;grammar=gbnf;prefill=true" in proc.stdout


def test_it_names_the_server_and_suggests_prefill_when_the_spec_sends_gbnf(llama_server: RunningServer) -> None:
    from runtime.endpoints import check_endpoint

    result = check_endpoint(spec(llama_server, "grammar=gbnf"))
    assert result.ok and result.server == "llamacpp" and "add ;prefill=true" in result.hint


def test_with_prefill_the_check_passes_and_gives_no_hint(llama_server: RunningServer) -> None:
    """The server takes the prefilled request and its rest-of-answer grammar; the reply is whole."""
    from runtime.endpoints import check_endpoint

    result = check_endpoint(spec(llama_server, "grammar=gbnf;prefill=true"))
    assert result.ok and result.answer.startswith('{"word"') and (result.server, result.hint) == ("llamacpp", "")
