"""A fault-injecting OpenAI-compatible server: a real HTTP/1.1 server on loopback that
speaks chat-completions over SSE, for the faults a real model server cannot be made to
produce on demand.

    with FaultServer(capacity=4, latency=0.1) as server:
        backend = open_backend(f"openai:{server.base_url}#m")
        ...
        assert server.max_in_flight <= 4

Behaviour is set per server (or changed with `configure`):
- capacity C: a call arriving while C are in flight gets 503 + Retry-After;
- latency L: each answered call takes L seconds before its first token;
- first_token_delay / token_delay: a slow first token, a slow stream;
- loading_for T: 503 "Loading model" (llama.cpp's body) for the first T seconds;
- storm_for T: 429 + Retry-After for the first T seconds;
- script: what the next requests get, in order ("ok", "429", "503", "500", "502",
  "504", "truncate", "no_done", "done_early", "inband", "inband_400", or a dict such as
  {"status": 401, "message": "...", "echo_auth": True}; "type" and "code" set the error's);
- answer: the text to stream (default: a minimal instance of the request's schema),
  finish_reason, usage on/off, reasoning text streamed as `reasoning_content`;
- logprobs (default on): a request with `logprobs: true` gets, per streamed piece of the
  answer, `choices[0].logprobs.content` as llama-server sends it (the piece as one token
  at `token_logprob`, and `top_logprobs` alternatives below it); off: none, as from a
  server that ignores the request; `alternatives` (a function of the request body and
  the piece) gives a piece's own top list, (token, logprob) pairs best first, in place
  of the made-up one (the piece's logprob is its entry there, else token_logprob; None
  from the function: the made-up list);
- json_answer: answer with one `chat.completion` JSON document instead of a stream (a
  server that ignores stream=true), logprobs included as above;
- echo_auth: the answer ends with the request's Authorization header (a server that
  echoes what it was sent);
- context_chars N: a request whose messages hold more than N characters gets the 400
  llama-server answers when a request exceeds its context (`exceed_context_size_error`).
Every request is recorded (headers, JSON body, timing, what it got); `GET /_stats` gives
the counts as JSON. `python -m tests.support.fault_server --capacity 4 --latency 0.1`
serves in its own process (as benchmarks/overload.py does, so the server does not share
the client's interpreter), prints its base URL, and stops when its stdin closes.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = str | Callable[[dict[str, Any]], str] | None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    started: float
    ended: float | None = None
    outcome: str = "pending"  # ok | 429 | 503 | 5xx | 4xx | truncate | no_done | inband | loading | disconnected
    status: int = 0

    @property
    def request_id(self) -> str | None:
        return self.headers.get("x-request-id")


@dataclass
class Faults:
    capacity: int | None = None
    retry_after: str | None = "1"
    latency: float = 0.0
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    loading_for: float = 0.0
    storm_for: float = 0.0
    script: list[Any] = field(default_factory=list)
    answer: Answer = None
    finish_reason: str = "stop"
    usage: bool = True
    reasoning: str | None = None
    chunk_chars: int = 4
    echo_auth: bool = False  # the answer ends with the Authorization header it was sent
    logprobs: bool = True  # honour `logprobs: true` (see the module docstring)
    token_logprob: float = -0.05
    alternatives: Callable[[dict[str, Any], str], list[tuple[str, float]] | None] | None = None
    json_answer: bool = False  # one JSON document, not an event stream
    context_chars: int = 0  # >0: a request whose messages hold more characters overflows (llama-server's 400)


def in_order(*texts: str) -> Any:
    """An `answer=` that gives `texts` in order, one per request."""
    queue = list(texts)
    return lambda body: queue.pop(0)


def example(schema: Any) -> Any:
    """A minimal instance of `schema` (what a perfectly obedient model would answer)."""
    if not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example(schema[key][0])
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        return {k: example(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [example(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "x" * max(2, schema.get("minLength", 0))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return {}


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    if fmt.get("type") == "json_object":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else {}
    guided = body.get("guided_json")
    return guided if isinstance(guided, dict) else None


class FaultServer:
    def __init__(self, **faults: Any) -> None:
        self.faults = Faults(**faults)
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.started_at = time.monotonic()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def spec(self, options: str = "", model: str = "fault") -> str:
        return f"openai:{self.base_url}#{model}" + (f";{options}" if options else "")

    def start(self) -> FaultServer:
        self.started_at = time.monotonic()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configure(self, **faults: Any) -> None:
        """Change behaviour; restarts the loading/storm clocks and clears the records."""
        with self.lock:
            for key, value in faults.items():
                if not hasattr(self.faults, key):
                    raise TypeError(f"unknown fault {key}")
                setattr(self.faults, key, value)
            self.started_at = time.monotonic()
            self.requests.clear()
            self.max_in_flight = 0

    # -- what was seen -----------------------------------------------------------------

    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.completions() if r.outcome == outcome)

    # -- deciding what a request gets ----------------------------------------------------

    def _admit(self, record: Recorded) -> Any:
        """Decide under the lock: returns the plan for this request."""
        with self.lock:
            self.requests.append(record)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            elapsed = time.monotonic() - self.started_at
            f = self.faults
            if f.loading_for and elapsed < f.loading_for:
                return "loading"
            if f.storm_for and elapsed < f.storm_for:
                return "429"
            if f.script:
                return f.script.pop(0)
            if f.capacity is not None and self.in_flight > f.capacity:
                return "503"
            return "ok"

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    owner: FaultServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing a kept-alive connection is normal here; anything else is a bug.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plain endpoints ---------------------------------------------------------------

    def do_GET(self) -> None:
        owner = self.server.owner
        loading = owner.faults.loading_for and time.monotonic() - owner.started_at < owner.faults.loading_for
        if self.path == "/_stats":
            with owner.lock:
                outcomes: dict[str, int] = {}
                for r in owner.completions():
                    outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
                self._json(200, {"max_in_flight": owner.max_in_flight, "outcomes": outcomes})
        elif self.path in ("/health", "/v1/health"):
            if loading:
                self._json(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
            else:
                self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fault", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    # -- chat completions --------------------------------------------------------------

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        record = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
        if not self.path.endswith("/chat/completions"):
            with owner.lock:
                owner.requests.append(record)
            record.outcome, record.status = "4xx", 404
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        plan = owner._admit(record)
        left = False
        try:
            left = self._serve(plan, body if isinstance(body, dict) else {}, record)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            record.outcome = "disconnected"
            self.close_connection = True
        finally:
            if not left:
                owner._leave()
            record.ended = time.monotonic()

    def _serve(self, plan: Any, body: dict[str, Any], record: Recorded) -> bool:
        """Answer per `plan`. Returns True if it already left the in-flight count."""
        owner = self.server.owner
        f = owner.faults
        status_plans = {"429": 429, "503": 503, "500": 500, "502": 502, "504": 504}
        if plan == "loading":
            record.outcome, record.status = "loading", 503
            body_out: Any = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
            headers: dict[str, str] | None = None
        elif isinstance(plan, str) and plan in status_plans:
            status = status_plans[plan]
            record.outcome, record.status = (plan if status in (429, 503) else "5xx"), status
            headers = {"Retry-After": f.retry_after} if status in (429, 503) and f.retry_after else {}
            message = {429: "rate limited", 503: "server busy"}.get(status, "internal error")
            body_out = {"error": {"message": message, "code": status}}
        elif isinstance(plan, dict):
            status = int(plan.get("status", 400))
            message = str(plan.get("message", "bad request"))
            if plan.get("echo_auth"):
                message += f" (you sent Authorization: {self.headers.get('Authorization')})"
            record.outcome, record.status = ("4xx" if status < 500 else "5xx"), status
            error_type, code = plan.get("type", "invalid_request_error"), plan.get("code", status)
            body_out = {"error": {"message": message, "type": error_type, "code": code}}
            headers = plan.get("headers")
        elif (
            f.context_chars
            and sum(len(str(m.get("content", ""))) for m in body.get("messages") or []) > f.context_chars
        ):
            record.outcome, record.status = "4xx", 400
            size = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
            message = f"request ({size} tokens) exceeds the available context size ({f.context_chars} tokens)"
            body_out = {"error": {"message": message, "type": "exceed_context_size_error", "code": 400}}
            headers = None
        else:
            return self._stream(plan, body, record)
        # Out of the in-flight count before the client can read the answer (see _stream).
        owner._leave()
        self._json(record.status, body_out, headers)
        return True

    def _logprobs(self, body: dict[str, Any], pieces: list[str]) -> dict[str, Any] | None:
        """`choices[0].logprobs` for `pieces` (one token each), as llama-server sends it."""
        f = self.server.owner.faults
        if not (f.logprobs and body.get("logprobs")):
            return None
        content = []
        for piece in pieces:
            chosen = f.alternatives(body, piece) if f.alternatives is not None else None
            if chosen is not None:
                top = [{"token": t, "logprob": lp} for t, lp in chosen]
                own = next((lp for t, lp in chosen if t == piece), f.token_logprob)
                content.append({"token": piece, "logprob": own, "top_logprobs": top})
                continue
            top = [
                {"token": piece if n == 0 else f"~{n}", "logprob": f.token_logprob - 2 * n}
                for n in range(int(body.get("top_logprobs") or 0))
            ]
            content.append({"token": piece, "logprob": f.token_logprob, "top_logprobs": top})
        return {"content": content}

    def _json_answer(self, text: str, body: dict[str, Any], record: Recorded) -> bool:
        owner = self.server.owner
        f = owner.faults
        pieces = [text[i : i + f.chunk_chars] for i in range(0, len(text), f.chunk_chars)]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": f.finish_reason,
        }
        logprobs = self._logprobs(body, pieces)
        if logprobs is not None:
            choice["logprobs"] = logprobs
        record.outcome = "ok"
        owner._leave()
        self._json(200, {"id": "chatcmpl-fault", "object": "chat.completion", "choices": [choice]})
        return True

    def _stream(self, plan: str, body: dict[str, Any], record: Recorded) -> bool:
        owner = self.server.owner
        f = owner.faults
        record.status = 200
        if f.json_answer:
            return self._json_answer(self._text(body), body, record)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        # The sleeps in this server are the behaviour it fakes (a slow model), not waits.
        if f.latency:
            time.sleep(f.latency)
        if f.first_token_delay:
            time.sleep(f.first_token_delay)
        schema = request_schema(body)
        text = self._text(body)
        base = {
            "id": "chatcmpl-fault",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fault"),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
            logprobs = self._logprobs(body, [delta["content"]]) if delta.get("content") else None
            if logprobs is not None:
                choice["logprobs"] = logprobs
            return {**base, "choices": [choice]}

        self._event(chunk({"role": "assistant", "content": ""}))
        pieces = [text[i : i + f.chunk_chars] for i in range(0, len(text), f.chunk_chars)] or [""]
        thoughts = []
        if f.reasoning and schema is not None:
            thoughts = [f.reasoning[i : i + f.chunk_chars] for i in range(0, len(f.reasoning), f.chunk_chars)]
        for piece in thoughts:
            self._event(chunk({"reasoning_content": piece}))
            if f.token_delay:
                time.sleep(f.token_delay)
        for n, piece in enumerate(pieces):
            if plan in ("truncate", "no_done", "done_early", "inband", "inband_400") and n == len(pieces) // 2:
                return self._fault(plan, record)
            self._event(chunk({"content": piece}))
            if f.token_delay:
                time.sleep(f.token_delay)
        # Leave the in-flight count (and record the outcome) before the last bytes, so a
        # client that acts the moment it reads [DONE] never sees stale numbers.
        record.outcome = "ok"
        owner._leave()
        self._event(chunk({}, f.finish_reason))
        if f.usage and (body.get("stream_options") or {}).get("include_usage"):
            prompt = sum(len(str(m.get("content", ""))) // 4 + 1 for m in body.get("messages", []))
            usage: dict[str, Any] = {
                "prompt_tokens": prompt,
                "completion_tokens": len(pieces) + len(thoughts),
                "total_tokens": prompt + len(pieces) + len(thoughts),
            }
            if thoughts:
                usage["completion_tokens_details"] = {"reasoning_tokens": len(thoughts)}
            self._event({**base, "choices": [], "usage": usage})
        self._write(b"data: [DONE]\n\n")
        self._end()
        return True

    def _text(self, body: dict[str, Any]) -> str:
        """The answer to `body` (see Faults.answer)."""
        f = self.server.owner.faults
        schema = request_schema(body)
        if callable(f.answer):
            text = f.answer(body)
        elif f.answer is not None:
            text = f.answer
        elif schema is not None or body.get("grammar"):
            text = json.dumps(example(schema or {}))
        else:
            text = "Let me think. The answer follows from the request."
        if f.echo_auth:
            text += f" (you sent Authorization: {self.headers.get('Authorization')})"
        return text

    def _fault(self, plan: str, record: Recorded) -> bool:
        record.outcome = plan
        if plan == "truncate":  # cut the connection mid-stream: no terminating chunk
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return False
        if plan == "no_done":  # a cleanly ended body that never finished the answer
            self._end()
            return False
        if plan == "done_early":  # [DONE] with no finish_reason, as an interrupted llama-cpp-python sends
            self._write(b"data: [DONE]\n\n")
            self._end()
            return False
        code = 400 if plan == "inband_400" else 500
        message = "prompt is too long" if code == 400 else "CUDA error: out of memory"
        self._event({"error": {"message": message, "type": "server_error", "code": code}})
        self._end()
        return False

    def _event(self, data: dict[str, Any]) -> None:
        self._write(b"data: " + json.dumps(data).encode() + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@contextmanager
def in_own_process(capacity: int | None, latency: float, retry_after: str = "1") -> Iterator[str]:
    """The server in a process of its own (so the measuring process's GIL does not slow
    it); yields its base URL and stops it on exit."""
    import subprocess
    import sys
    from pathlib import Path

    args = [sys.executable, "-m", "tests.support.fault_server", "--latency", str(latency), "--retry-after", retry_after]
    if capacity is not None:
        args += ["--capacity", str(capacity)]
    proc = subprocess.Popen(
        args, cwd=Path(__file__).resolve().parents[2], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Serve the fault-injecting server until stdin closes.")
    parser.add_argument("--capacity", type=int)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--retry-after", default="1")
    args = parser.parse_args(argv)
    with FaultServer(capacity=args.capacity, latency=args.latency, retry_after=args.retry_after) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
