"""Per-token logprobs from an openai: endpoint (for confidence gates), against the
fault-injecting server on loopback; `packforge endpoints check` saying whether an
endpoint returns them; and the grammar-renormalised confidence from a real llama-server
(stories260K; skipped, never built, when the cached binary or the model is absent)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import load_pack, run_pack
from runtime.backends import Backend, ModelCall, ModelReply
from runtime.backends._sse import StreamResult, _take
from runtime.confidence import value_confidence, value_shares
from runtime.endpoints import check_endpoint
from tests.support import model_servers
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener, RunningServer
from tests.support.packs import RATING_SCHEMA
from tests.support.runtime_packs import pf, write_pack


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


# -- against a real llama-server (stories260K), when it is built and the model is present ----


@pytest.fixture(scope="module")
def built_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """llama-server from the build cache (PACKFORGE_BUILD_CACHE); skipped, never built, when absent."""
    if not model_servers.MODEL.exists():
        pytest.skip(f"the test model is absent: {model_servers.MODEL} (see shared/models/README.md)")
    if not model_servers.llama_server_binary().exists():
        pytest.skip(f"no llama-server built in {model_servers.CACHE} (set PACKFORGE_BUILD_CACHE)")
    server = model_servers.start_llama_server(Path(tmp_path_factory.mktemp("llama-server")), parallel=1)
    yield server
    server.stop()


class Keeper:
    """Wraps a backend and keeps every call and reply."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.spec = getattr(inner, "spec", "")
        self.exchanges: list[tuple[ModelCall, ModelReply]] = []

    def complete(self, call: ModelCall) -> ModelReply:
        reply = self.inner.complete(call)
        self.exchanges.append((call, reply))
        return reply

    def close(self) -> None:
        self.inner.close()


MOODS = ["happy", "sad", "angry", "scared"]


@pytest.mark.parametrize("grammar", ["json_schema", "gbnf"])
def test_it_measures_a_sane_confidence_from_a_real_llama_server(
    built_llama_server: RunningServer, opened: Opener, tmp_path: Path, grammar: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"mood": {"enum": MOODS}},
        "required": ["mood"],
        "additionalProperties": False,
    }
    root = write_pack(
        tmp_path / "pack",
        nodes={
            "feel": {
                "kind": "generate",
                "reads": ["input.story"],
                "writes": ["mood"],
                "confidence": {"field": "mood", "min": 0.5},
            },
            "done": {"kind": "end"},
            "review": {"kind": "end"},
        },
        edges=[{"from": "feel", "to": "done"}, {"from": "feel", "on_unsure": "review"}],
        prompts={"feel": "How does Lily feel? {{ input.story }}"},
        grammars={"feel": schema},
    )
    backend = Keeper(opened(model_servers.spec(built_llama_server, f"grammar={grammar}")))
    result = run_pack(load_pack(root), {"story": "Lily lost her ball and cried."}, backend=backend)
    assert result.status == "done", result.trace.error
    step = result.trace.steps[0]
    conf = step.confidence
    assert conf is not None and conf["source"] == "logprobs" and conf["basis"] == "grammar", conf
    assert conf["value"] in MOODS
    [(call, reply)] = backend.exchanges
    assert call.logprobs is True and reply.logprobs is not None
    shares = value_shares(reply.text, reply.logprobs, "mood", conf["value"], MOODS, greedy=True)  # temperature 0
    assert shares is not None and sum(share for _, share in shares) == pytest.approx(1.0)
    assert shares[0] == (conf["value"], pytest.approx(conf["p"]))
    # The model's own (pre-grammar) probability of the value is tiny; the renormalised one is not.
    raw = value_confidence(reply.text, reply.logprobs, "mood", conf["value"])
    assert raw is not None and raw.p is not None and raw.p < conf["p"]
    assert 1e-3 < conf["p"] <= 1.0 and -1.0 <= conf["margin"] <= conf["p"]
    assert result.trace.path == (["feel", "done"] if conf["p"] >= 0.5 else ["feel", "review"])
    print(
        f"{grammar}: {reply.text!r} p={conf['p']:.4g} raw={raw.p:.3g} shares={shares} seen={conf['alternatives_seen']}"
    )
