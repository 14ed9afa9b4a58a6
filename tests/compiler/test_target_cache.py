"""The target-call cache (compiler/target_cache.py): what is in the key, what a stored
entry must look like, and that an answer read back is the answer stored."""

from __future__ import annotations

import json
from pathlib import Path

from compiler.target_cache import CachedBackend, call_key
from runtime import ModelCall, ModelReply, TokenLogprob


class Counting:
    spec = "openai:http://127.0.0.1:1/v1#m"

    def __init__(self) -> None:
        self.calls: list[ModelCall] = []

    def complete(self, call: ModelCall) -> ModelReply:
        self.calls.append(call)
        return ModelReply(
            text=json.dumps({"n": len(self.calls)}),
            prompt_tokens=7,
            completion_tokens=3,
            logprobs=[TokenLogprob("{", -0.1, [("{", -0.1), ("[", -2.5)])],
        )

    def close(self) -> None:
        pass


def call(node: str = "classify", attempt: int = 1, case: str = "c1") -> ModelCall:
    return ModelCall(
        f"run-{case}", node, attempt, [{"role": "user", "content": "hi"}], {"type": "object"}, case_id=case
    )


def test_the_same_request_from_another_run_or_case_is_answered_from_disk(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachedBackend(inner, tmp_path)
    first = cached.complete(call(case="c1"))
    again = cached.complete(call(case="c2"))
    assert len(inner.calls) == 1 and (cached.counts.calls, cached.counts.hits) == (1, 1)
    assert again.text == first.text and again.request_id == "run-c2.classify.1"
    assert again.logprobs is not None and again.logprobs[0].top == [("{", -0.1), ("[", -2.5)]


def test_the_draw_number_and_the_node_are_part_of_the_key() -> None:
    spec = Counting.spec
    keys = {call_key(spec, call()), call_key(spec, call(attempt=2)), call_key(spec, call(node="other"))}
    assert len(keys) == 3
    assert call_key("fake:x.json", call(case="a")) != call_key("fake:x.json", call(case="b"))  # scripted: by case


def test_an_entry_it_did_not_write_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    inner = Counting()
    key = call_key(Counting.spec, call())
    path = tmp_path / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    for junk in ("not json", json.dumps({"reply": {}}), json.dumps({"reply": {"text": "x", "bogus": 1}}), "[]"):
        path.write_text(junk)
        CachedBackend(inner, tmp_path).complete(call())
    assert len(inner.calls) == 4
