"""Reading an OpenAI chat-completions SSE stream into one answer.

A stream is complete when it carried a `finish_reason` (and normally `data: [DONE]`);
one that ends without a finish_reason, with or without [DONE], was cut off and is a
`truncated` failure. An
`error` object inside the stream is an in-band error. Reasoning deltas
(`reasoning_content`, `reasoning`) are kept apart from the answer: they are counted and
may be shown in a trace, never parsed as the answer. Per-token log probabilities
(`choices[0].logprobs.content`, asked for with `logprobs: true`) are gathered from the
chunks that carry answer text, in order; one malformed entry drops them all (a list that
does not spell the answer is worse than none)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from runtime.backends._retry import Failure
from runtime.backends.base import ModelCall, TokenLogprob
from runtime.errors import Cancelled
from runtime.logs import redact

_REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass
class StreamResult:
    parts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None  # llama-server's `timings` (prompt_n: read, cache_n: from its cache)
    first_token_at: float | None = None
    content_deltas: int = 0
    reasoning_deltas: int = 0
    done: bool = False
    logprobs: list[TokenLogprob] | None = None  # None: the server sent none
    logprobs_bad: bool = False  # an entry was malformed: report none

    @property
    def token_logprobs(self) -> list[TokenLogprob] | None:
        return None if self.logprobs_bad else self.logprobs

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)


def _in_band(error: Any) -> Failure:
    message = error.get("message") if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    text = redact(str(message or error))[:1000]
    if isinstance(code, int) and 400 <= code < 500 and code not in (408, 429):
        return Failure("rejected", f"in-band error: {text}", code)
    return Failure("server", f"in-band error: {text}", code if isinstance(code, int) else None)


def _logprob(value: Any) -> float | None:
    """A logprob from JSON: a number, or null for -inf (llama.cpp writes a zero
    probability's log as null)."""
    if value is None:
        return float("-inf")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _token(entry: Any) -> TokenLogprob | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
        return None
    logprob = _logprob(entry.get("logprob"))
    if logprob is None:
        return None
    top: list[tuple[str, float]] = []
    for alt in entry.get("top_logprobs") or []:
        alt_logprob = _logprob(alt.get("logprob")) if isinstance(alt, dict) else None
        if alt_logprob is None or not isinstance(alt.get("token"), str):
            return None
        top.append((alt["token"], alt_logprob))
    return TokenLogprob(entry["token"], logprob, top)


def _take_logprobs(choice: dict[str, Any], result: StreamResult) -> None:
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return
    if result.logprobs is None:
        result.logprobs = []
    for entry in content:
        token = _token(entry)
        if token is None:
            result.logprobs_bad = True
            return
        result.logprobs.append(token)


def _take(chunk: dict[str, Any], result: StreamResult) -> None:
    if isinstance(chunk.get("usage"), dict):
        result.usage = chunk["usage"]
    if isinstance(chunk.get("timings"), dict):
        result.timings = chunk["timings"]
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or choice.get("message") or {}
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                result.parts.append(content)
                result.content_deltas += 1
                if result.first_token_at is None:
                    result.first_token_at = time.monotonic()
            if isinstance(content, str) and (content or "delta" not in choice):
                # Answer tokens only: a chunk of reasoning carries its own tokens' logprobs.
                _take_logprobs(choice, result)
            for key in _REASONING_KEYS:
                thought = delta.get(key)
                if isinstance(thought, str) and thought:
                    result.reasoning.append(thought)
                    result.reasoning_deltas += 1
                    if result.first_token_at is None:
                        result.first_token_at = time.monotonic()
                    break
        if choice.get("finish_reason"):
            result.finish_reason = str(choice["finish_reason"])


def too_large(max_bytes: int) -> Failure:
    return Failure(
        "rejected",
        f"the answer passed {max_bytes} bytes (the endpoint's max_answer_bytes); it was cut off and not used",
    )


def read_stream(
    response: httpx.Response, call: ModelCall, deadline_at: float, max_bytes: int = 16 << 20
) -> StreamResult | Failure:
    """Consume `response` (status 200). Returns the answer, or the Failure that ended it.
    At most `max_bytes` of the body are read: a server that streams more is cut off (a
    rejected call, not retried)."""
    result = StreamResult()
    if "text/event-stream" not in response.headers.get("content-type", ""):
        # A server that ignored stream=true and answered with one JSON document.
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > max_bytes:
                return too_large(max_bytes)
        try:
            doc = json.loads(bytes(body))
        except json.JSONDecodeError:
            return Failure("server", "the server answered 200 with neither an event stream nor JSON")
        if isinstance(doc, dict) and "error" in doc:
            return _in_band(doc["error"])
        if isinstance(doc, dict):
            _take(doc, result)
        result.done = result.finish_reason is not None
        return result if result.done else Failure("truncated", "the JSON answer had no finish_reason")
    event = "message"
    data: list[str] = []
    for line in _lines(response, max_bytes):
        if call.cancel is not None and call.cancel.is_set():
            raise Cancelled("run cancelled")
        if line is None:
            return too_large(max_bytes)
        if time.monotonic() > deadline_at:
            return Failure("timeout", "the deadline passed while the answer was streaming")
        if line:
            field_name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field_name == "data":
                data.append(value)
            elif field_name == "event":
                event = value.strip()
            continue
        if not data:
            continue
        failure = _dispatch(event, "\n".join(data), result)
        event, data = "message", []
        if failure is not None:
            return failure
        if result.done:
            break
    if data:  # a last event without its blank line
        failure = _dispatch(event, "\n".join(data), result)
        if failure is not None:
            return failure
    if call.cancel is not None and call.cancel.is_set():
        raise Cancelled("run cancelled")
    if result.finish_reason is None:
        # Also when [DONE] came: llama-cpp-python's server, when interrupted by another
        # request, ends an unfinished answer with [DONE] and no finish_reason.
        return Failure("truncated", "the stream ended before the answer finished (no finish_reason)")
    return result


def _lines(response: httpx.Response, max_bytes: int) -> Iterator[str | None]:
    """The body's lines (LF or CRLF), read as bytes so that at most `max_bytes` are ever
    held or read, whether or not the server sends a line break; None once past it."""
    buffer = bytearray()
    received = 0
    for chunk in response.iter_bytes():
        received += len(chunk)
        if received > max_bytes:
            yield None
            return
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start:end]).rstrip(b"\r").decode("utf-8", errors="replace")
            start = end + 1
        del buffer[:start]
    if buffer:
        yield bytes(buffer).rstrip(b"\r").decode("utf-8", errors="replace")


def _dispatch(event: str, payload: str, result: StreamResult) -> Failure | None:
    if payload.strip() == "[DONE]":
        result.done = True
        return None
    try:
        chunk = json.loads(payload)
    except json.JSONDecodeError:
        if event == "error":
            return _in_band(payload)
        return Failure("truncated", "the stream carried an event that is not JSON")
    if not isinstance(chunk, dict):
        return Failure("truncated", "the stream carried an event that is not a JSON object")
    if event == "error" or "error" in chunk:
        return _in_band(chunk.get("error", chunk))
    _take(chunk, result)
    return None
