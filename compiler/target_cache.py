"""Every call to the target model, cached on disk and content-addressed.

The key is a digest of what decides the answer: the model spec, the messages, the
grammar, the sampling parameters (max_tokens, temperature, logprobs, purpose) and the
draw number (`ModelCall.attempt`: the Nth call at a node in one run). The run id and the
case id are not part of it, so the same prompt asked by another trial, another build or
another work dir is answered from the cache. A rebuild with the same `--cache` makes no
call it has made before (benchmarks/compile_target.py counts them).

An entry is one JSON file, `<dir>/<2 hex>/<64 hex>.json`, written to a temporary name and
renamed, so a reader (another thread, a killed build resumed) never sees half of one.
A context overflow is cached too: the same request cannot fit the next time either.
Other errors (a server down, a timeout) are not: the call is made again. An entry that
is not one this module wrote is a miss. Two threads that miss the same key at once both
ask the model (the second write wins; both answers were valid draws).

A scripted target (`fake:`, `sim:`) answers by case and input rather than by prompt, so
for those the case id and the input are part of the key too."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from runtime import Backend, ContextOverflow, ModelCall, ModelReply, TokenLogprob

KEY_VERSION = 2
SCRIPTED = ("fake:", "sim:")


REPLY_FIELDS = frozenset(f.name for f in fields(ModelReply)) - {"request_id"}


@dataclass
class CacheCounts:
    """What went through the cache: calls sent to the model (misses), calls answered from
    disk (hits), and the tokens the sent calls used."""

    calls: int = 0
    hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def call_key(spec: str, call: ModelCall) -> str:
    """The digest that names `call` in the cache (module docstring)."""
    document = {
        "v": KEY_VERSION,
        "model": spec,
        "messages": call.messages,
        "schema": call.schema,
        "max_tokens": call.max_tokens,
        "temperature": call.temperature,
        "purpose": call.purpose,
        "logprobs": call.logprobs,
        "draw": call.attempt,
        "node": call.node,  # an OpenAI-style endpoint sees it as the json_schema's name
    }
    if call.given is not None:  # values written ahead of the model (prefill); absent keeps older keys
        document["given"] = call.given
    if spec.startswith(SCRIPTED):  # a scripted model answers by case and input, not by prompt
        document["case"] = call.case_id
        document["input"] = call.input
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedBackend:
    """A Backend that answers from `folder` when it can and asks `inner` otherwise,
    storing what `inner` answers. Thread-safe (the eval runs cases in threads)."""

    def __init__(self, inner: Backend, folder: Path, spec: str | None = None) -> None:
        self.inner = inner
        self.folder = Path(folder)
        self.spec = spec or inner.spec
        self.counts = CacheCounts()
        self._lock = threading.Lock()

    def complete(self, call: ModelCall) -> ModelReply:
        key = call_key(self.spec, call)
        path = self.folder / key[:2] / f"{key}.json"
        stored = _read(path)
        if stored is not None:
            with self._lock:
                self.counts.hits += 1
            return _reply(stored, call)
        try:
            reply = self.inner.complete(call)
        except ContextOverflow as exc:
            self._count(0, 0)
            _write(path, {"overflow": str(exc)})
            raise
        self._count(reply.prompt_tokens, reply.completion_tokens)
        _write(path, {"reply": _stored(reply)})
        return reply

    def _count(self, prompt: int, completion: int) -> None:
        with self._lock:
            self.counts.calls += 1
            self.counts.prompt_tokens += prompt
            self.counts.completion_tokens += completion

    def close(self) -> None:
        self.inner.close()


def _stored(reply: ModelReply) -> dict[str, Any]:
    data = asdict(reply)
    data.pop("request_id", None)
    return data


def _reply(stored: dict[str, Any], call: ModelCall) -> ModelReply:
    if "overflow" in stored:
        raise ContextOverflow(str(stored["overflow"]), call.request_id)
    data = dict(stored["reply"])
    logprobs = data.pop("logprobs", None)
    reply = ModelReply(**data, request_id=call.request_id)
    if logprobs is not None:
        reply.logprobs = [
            TokenLogprob(t["token"], t["logprob"], [(str(a), float(b)) for a, b in t.get("top") or []])
            for t in logprobs
        ]
    return reply


def _read(path: Path) -> dict[str, Any] | None:
    """The stored entry, or None (a miss) when there is none or it is not one this module
    wrote: not JSON, or a reply that is not a ModelReply's fields."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("overflow"), str):
        return data
    reply = data.get("reply")
    if not isinstance(reply, dict) or not isinstance(reply.get("text"), str) or not set(reply) <= REPLY_FIELDS:
        return None
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


__all__ = ["CacheCounts", "CachedBackend", "call_key"]
