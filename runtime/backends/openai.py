"""`openai:BASE_URL#MODEL;key=value;...`: any OpenAI-compatible chat-completions server
(llama.cpp, vLLM, SGLang, Ollama, hosted APIs).

Every call streams (SSE) so that cancelling a run stops generation on the server; the
node's JSON schema goes out as a grammar in the endpoint's dialect; failures are
classified and retried (runtime.backends._retry); at most `concurrency` calls are in
flight per opened endpoint; usage, latency and cost come back on the ModelReply.
Spec syntax, defaults and the failure table: docs/endpoints.md."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import httpx

from runtime.backends._grammar import opening, schema_to_gbnf
from runtime.backends._retry import CANCEL_WATCH, Failure, RetryPolicy, classify_status, parse_retry_after, wait
from runtime.backends._sse import StreamResult, read_stream
from runtime.backends.base import Backend, ModelCall, ModelReply, TokenLogprob, estimate_tokens
from runtime.backends.config import GRAMMAR_MODES, OpenAIConfig, parse_openai_spec
from runtime.errors import BackendError, BadSpec, Cancelled, ContextOverflow, NoSpareSlot
from runtime.logs import redact, register_secret

__all__ = [
    "GRAMMAR_MODES",
    "EndpointConfig",
    "EndpointRejected",
    "EndpointUnavailable",
    "OpenAIBackend",
    "parse_spec",
]

log = logging.getLogger("packforge.backend")

_MAX_ERROR_BODY = 64 * 1024
# uuid5 namespace for `request_id=uuid`: the same run.node.attempt always maps to the same UUID.
REQUEST_ID_NAMESPACE = uuid.UUID("5f0c3a52-8d8e-4c1e-9d38-2f6a1f0b7c11")
# Alternatives asked for per token when a call wants logprobs: the most OpenAI and vLLM
# (--max-logprobs, default 20) accept; llama-server takes any number (n_probs). Confidence
# is renormalised over the alternatives the grammar allows (runtime.confidence), so the
# more are listed, the less allowed probability goes unseen.
TOP_LOGPROBS = 20


class EndpointRejected(BackendError):
    """The server refused the request itself (a 4xx): retrying cannot help. The message
    is the server's own, redacted."""

    def __init__(self, message: str, status: int | None = None, request_id: str = "") -> None:
        self.status = status
        self.request_id = request_id
        super().__init__(message)


class EndpointUnavailable(BackendError):
    """No answer within the endpoint's attempts or deadline (overload, 5xx, timeouts,
    truncated streams, a model that never finished loading)."""

    def __init__(self, message: str, last: str = "", request_id: str = "") -> None:
        self.last = last
        self.request_id = request_id
        super().__init__(message)


_CAPS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_CAPS_LOCK = threading.Lock()


def _cap(config: OpenAIConfig) -> threading.BoundedSemaphore:
    """The in-flight cap for an endpoint, shared by every backend this process opens on
    the same base URL with the same `concurrency` (the eval runner and a studio worker
    may open several)."""
    with _CAPS_LOCK:
        key = (config.base_url, config.concurrency)
        if key not in _CAPS:
            _CAPS[key] = threading.BoundedSemaphore(config.concurrency)
        return _CAPS[key]


def _server_message(response: httpx.Response) -> str:
    """The server's own words from an error body, whatever shape it uses."""
    raw = response.content[:_MAX_ERROR_BODY].decode("utf-8", errors="replace")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return raw.strip()[:500] or (response.reason_phrase or "")
    for path in (("error", "message"), ("error",), ("detail",), ("message",)):
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, str) and node:
            return node[:1000]
        if node is not None and path == ("detail",):
            return json.dumps(node)[:1000]
    return raw.strip()[:500]


def _context_overflow(response: httpx.Response) -> bool:
    """Whether an error answer says the request exceeds the model's context: llama-server
    answers HTTP 400 with `error.type` `exceed_context_size_error`, OpenAI answers 400 with
    `error.code` `context_length_exceeded`."""
    if response.status_code != 400:
        return False
    try:
        data = json.loads(response.content[:_MAX_ERROR_BODY])
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return False
    return error.get("type") == "exceed_context_size_error" or error.get("code") == "context_length_exceeded"


class OpenAIBackend:
    """A chat-completions client for one endpoint. Thread-safe: the eval runner calls
    `complete` from many threads; at most `concurrency` calls are in flight at once,
    across every backend this process opened on the same base URL and concurrency."""

    def __init__(self, spec: str, config: OpenAIConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.spec = spec
        self.config = config
        self._key: str | None = None
        if config.key_env is not None:
            key = os.environ.get(config.key_env)
            if not key:
                raise BadSpec(f"environment variable {config.key_env} (key_env of {config.base_url}) is not set")
            register_secret(key)  # before anything can log or raise with it
            self._key = key
        self._slots = _cap(config)
        self._policy = RetryPolicy(backoff_s=config.backoff, jitter=config.jitter)
        self._client = httpx.Client(
            transport=transport,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency),
        )

    @property
    def lookahead(self) -> int:
        """How many calls a run may make ahead of its nodes (runtime.lookahead)."""
        return self.config.lookahead

    def close(self) -> None:
        self._client.close()

    def server_owner(self) -> str | None:
        """Who serves the model, as `GET /models` says (`owned_by`: "llamacpp" for
        llama.cpp's server); None when the endpoint does not say. Only `endpoints check`
        asks, to suggest a grammar mode."""
        answer = self.probe("GET", self.config.base_url + "/models")
        models = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(models, list):
            return None
        owners = {m.get("owned_by") for m in models if isinstance(m, dict)}
        return next((o for o in sorted(owners, key=str) if isinstance(o, str)), None)

    @property
    def server_root(self) -> str:
        """The server's own address: `base_url` without its `/v1` (llama-server and vLLM
        serve /props and /tokenize there)."""
        base = self.config.base_url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def probe(self, method: str, url: str, body: Any = None) -> Any:
        """One quick request to the server about itself (its models, context, tokenizer):
        the JSON answer, or None on any failure. Never retried; not a model call."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            response = self._client.request(method, url, json=body, headers=headers, timeout=5.0)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    # -- the request -------------------------------------------------------------------

    def body(self, call: ModelCall, written: str | None) -> dict[str, Any]:
        """The request body; `written`: the answer's opening written ahead (`self.opening(call)`)."""
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": call.messages,
            "max_tokens": call.max_tokens,
            "temperature": call.temperature,
            "stream": True,
        }
        if cfg.usage:
            body["stream_options"] = {"include_usage": True}
        if cfg.slots:
            # llama-server: every call of one run goes to one slot, whose KV cache still
            # holds the run's earlier prompts (system, input), so only the new tail is read.
            # A call made ahead (lane > 0) runs beside the run's own: another slot.
            body["id_slot"] = (zlib.crc32(call.run_id.encode()) + call.lane) % cfg.slots
            body["cache_prompt"] = True
        if call.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        schema = call.schema
        if schema is None or cfg.grammar == "none":
            return body
        if cfg.grammar == "json_schema":
            name = re.sub(r"[^a-zA-Z0-9_-]", "_", call.node)[:64] or "answer"
            spec: dict[str, Any] = {"name": name, "schema": schema}
            if cfg.strict:
                spec["strict"] = True
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif cfg.grammar == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif cfg.grammar == "guided_json":
            body["guided_json"] = schema
        elif cfg.grammar == "gbnf":
            if written is not None:
                # llama-server continues a final assistant message: the opening is read with
                # the prompt (one batch) instead of decoded a token at a time, and the
                # grammar covers the rest of the answer.
                body["messages"] = [*call.messages, {"role": "assistant", "content": written}]
            body["grammar"] = schema_to_gbnf(schema, compact=cfg.compact, opened=written is not None).text
        return body

    def opening(self, call: ModelCall) -> str | None:
        """The answer's opening this call writes ahead of the model (`prefill=true`), or None."""
        if not self.config.prefill or call.schema is None or self.config.grammar != "gbnf":
            return None
        if call.messages and call.messages[-1].get("role") == "assistant":
            return None  # the messages already end in an answer begun (two_stage's reasoning)
        return opening(call.schema, call.given)

    def headers(self, call: ModelCall) -> dict[str, str]:
        headers = {"X-Request-ID": call.request_id, "Accept": "text/event-stream"}
        if self.config.request_id == "uuid":
            # Some servers (llama-cpp-python's, via starlette-context) answer 400 to an
            # X-Request-ID that is not a UUID; the readable id travels alongside.
            headers["X-Request-ID"] = str(uuid.uuid5(REQUEST_ID_NAMESPACE, call.request_id))
            headers["X-Packforge-Request-ID"] = call.request_id
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    # -- one call ----------------------------------------------------------------------

    def complete(self, call: ModelCall) -> ModelReply:
        written = self.opening(call)
        body, headers = self.body(call, written), self.headers(call)
        log.debug(
            "backend.request",
            extra={
                "fields": {
                    "request_id": call.request_id,
                    "url": self.config.url,
                    "grammar": self.config.grammar,
                    "max_tokens": call.max_tokens,
                    "constrained": call.schema is not None,
                    # characters of the answer written ahead (prefill=true); not the text,
                    # which may hold a quorum's settled values (model output)
                    "prefill": len(written) if written is not None else None,
                }
            },
        )
        self._acquire(call)
        # The deadline starts once a slot is held: time spent queued behind this
        # process's other calls is bounded by `queue_wait`, not taken from the call.
        started = time.monotonic()
        deadline_at = started + self.config.deadline
        try:
            result = self._with_retries(call, body, headers, started, deadline_at)
        finally:
            self._slots.release()
        return self._reply(call, result, started, written)

    def _acquire(self, call: ModelCall) -> None:
        cfg = self.config
        if call.spare:
            if not self._slots.acquire(blocking=False):
                raise NoSpareSlot(
                    f"{cfg.base_url}: no free slot of concurrency={cfg.concurrency} for a call made ahead"
                )
            return
        give_up_at = time.monotonic() + cfg.queue_wait
        while not self._slots.acquire(timeout=0.05):
            if call.cancel is not None and call.cancel.is_set():
                raise Cancelled("run cancelled")
            if time.monotonic() >= give_up_at:
                raise EndpointUnavailable(
                    f"{cfg.base_url}: waited {cfg.queue_wait:g}s (queue_wait) for a slot of concurrency="
                    f"{cfg.concurrency} without getting one; raise the endpoint's concurrency (if the server "
                    f"serves that many at once) or lower the eval's concurrency",
                    request_id=call.request_id,
                )

    def _with_retries(
        self, call: ModelCall, body: dict[str, Any], headers: dict[str, str], started: float, deadline_at: float
    ) -> StreamResult:
        cfg = self.config
        tries = failures = 0
        while True:
            tries += 1
            outcome = self._attempt(call, body, headers, deadline_at)
            if isinstance(outcome, StreamResult):
                return outcome
            failure = outcome
            where = f"{cfg.base_url} (request {call.request_id})"
            if not failure.retried:
                raise EndpointRejected(
                    f"{where}: {self._describe(failure, kind=False)}", failure.status, call.request_id
                )
            if failure.counted:
                failures += 1
            if failures >= cfg.attempts:
                raise EndpointUnavailable(
                    f"{where}: gave up after {tries} tries ({failures} counted of attempts={cfg.attempts}); "
                    f"last: {self._describe(failure)}",
                    failure.message,
                    call.request_id,
                )
            delay = self._policy.delay(failure, max(1, failures))
            if time.monotonic() + delay >= deadline_at:
                raise EndpointUnavailable(
                    f"{where}: deadline of {cfg.deadline:g}s exhausted after {tries} tries "
                    f"({time.monotonic() - started:.1f}s); last: {self._describe(failure)}",
                    failure.message,
                    call.request_id,
                )
            log.info(
                "backend.retry",
                extra={
                    "fields": {
                        "request_id": call.request_id,
                        "failure": failure.kind,
                        "status": failure.status,
                        "retry_after": failure.retry_after,
                        "delay_s": round(delay, 3),
                        "try": tries,
                    }
                },
            )
            if wait(delay, call.cancel):
                raise Cancelled("run cancelled")

    @staticmethod
    def _describe(failure: Failure, kind: bool = True) -> str:
        status = f"HTTP {failure.status}: " if failure.status is not None else ""
        return f"{failure.kind + ': ' if kind else ''}{status}{failure.message}"

    def _attempt(
        self, call: ModelCall, body: dict[str, Any], headers: dict[str, str], deadline_at: float
    ) -> StreamResult | Failure:
        remaining = max(0.001, deadline_at - time.monotonic())
        read = min(self.config.timeout, remaining)
        timeout = httpx.Timeout(read, connect=min(10.0, read), pool=remaining)
        token: int | None = None
        try:
            with self._client.stream("POST", self.config.url, json=body, headers=headers, timeout=timeout) as response:
                if call.cancel is not None:
                    token = CANCEL_WATCH.add(call.cancel, _closer(response))
                if response.status_code != 200:
                    response.read()
                    message = redact(_server_message(response))
                    if _context_overflow(response):
                        where = f"{self.config.base_url} (request {call.request_id})"
                        raise ContextOverflow(f"{where}: {message}", call.request_id)
                    retry_after = parse_retry_after(response.headers.get("retry-after"))
                    return classify_status(response.status_code, retry_after, message)
                return read_stream(response, call, deadline_at, self.config.max_answer_bytes)
        except httpx.TimeoutException as exc:
            if call.cancel is not None and call.cancel.is_set():
                raise Cancelled("run cancelled") from None
            return Failure("timeout", f"{type(exc).__name__} (timeout={read:g}s)")
        except httpx.TransportError as exc:
            if call.cancel is not None and call.cancel.is_set():
                raise Cancelled("run cancelled") from None
            kind = "truncated" if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)) else "connection"
            return Failure(kind, redact(f"{type(exc).__name__}: {exc}"))
        finally:
            if token is not None:
                CANCEL_WATCH.remove(token)

    # -- the reply ---------------------------------------------------------------------

    def _reply(self, call: ModelCall, result: StreamResult, started: float, written: str | None) -> ModelReply:
        cfg = self.config
        usage = result.usage or {}
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        details = usage.get("completion_tokens_details") or {}
        reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if not isinstance(reasoning, int):
            reasoning = result.reasoning_deltas
        if isinstance(completion, int):
            # Servers count reasoning inside completion_tokens; keep the answer's share here.
            completion = max(0, completion - reasoning) if reasoning else completion
        else:
            completion = result.content_deltas
        if not isinstance(prompt, int):
            prompt = sum(estimate_tokens(m.get("content", "")) for m in call.messages)
        cached = cached_tokens(usage, result.timings)
        cost = (prompt * cfg.price_in + (completion + reasoning) * cfg.price_out) / 1_000_000
        now = time.monotonic()
        ttft = result.first_token_at - started if result.first_token_at is not None else None
        text, logprobs = result.text, result.token_logprobs
        if written is not None:
            text, logprobs = _with_opening(written, text, logprobs)
        return ModelReply(
            text=text,
            finish_reason=result.finish_reason or "stop",
            prompt_tokens=prompt,
            cached_tokens=cached,
            completion_tokens=completion,
            reasoning_tokens=reasoning,
            latency_s=now - started,
            ttft_s=ttft,
            cost_usd=cost,
            request_id=call.request_id,
            reasoning_text=result.reasoning_text or None,
            logprobs=logprobs if call.logprobs else None,
        )


def _with_opening(
    written: str, text: str, logprobs: list[TokenLogprob] | None
) -> tuple[str, list[TokenLogprob] | None]:
    """The whole answer of a call whose opening was written ahead of the model: llama-server
    returns it with the opening, a server that returns only the continuation gets it put
    back. Its token gets probability 1: the grammar left no choice there, and values
    written with it (`ModelCall.given`) were settled by an earlier draw, whose own
    probabilities are what `sure` read."""
    if not text.startswith(written):
        text = written + text
    if logprobs is not None and not "".join(t.token for t in logprobs).startswith(written):
        logprobs = [TokenLogprob(written, 0.0, [(written, 0.0)]), *logprobs]
    return text, logprobs


def cached_tokens(usage: dict[str, Any], timings: dict[str, Any] | None) -> int | None:
    """Prompt tokens the server served from its cache: OpenAI-style
    `usage.prompt_tokens_details.cached_tokens` (vLLM, OpenAI), else llama-server's
    `timings.cache_n` (its `prompt_n` is what it read); None when neither says."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        return int(details["cached_tokens"])
    if timings is not None and isinstance(timings.get("cache_n"), int):
        return int(timings["cache_n"])
    return None


def _closer(response: httpx.Response) -> Any:
    """Shut the response's socket down from another thread (a plain close does not wake
    a recv blocked in this one)."""

    def close() -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()

    return close


def open_openai(config: OpenAIConfig, label: str, base_dir: Path | None, default: str | None) -> Backend:
    """The `openai` backend kind's opener (runtime.backends.BACKEND_KINDS)."""
    return OpenAIBackend(label, config)


# The names this module has always exported: the config class and its parser live in
# runtime.backends.config, below every backend.
EndpointConfig = OpenAIConfig


def parse_spec(spec: str) -> OpenAIConfig:
    """Parse `openai:BASE_URL#MODEL[;key=value]...` without touching the network or env."""
    return parse_openai_spec(spec)
