"""Structured logging with credentials redacted at the formatter.

Redaction happens on the final formatted line, so no call site, extra field or
exception text can carry a key past it. Off by default: a library does not configure
logging for its host; the CLI turns it on with --log-level."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from functools import lru_cache
from typing import Any

REDACTED = "[REDACTED]"
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
]
_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Make `value` redacted from every log line from now on (e.g. a key read from an
    environment variable named in an endpoint's config)."""
    if len(value) >= 4:
        with _lock:
            _registered.add(value)


def _secrets() -> tuple[str, ...]:
    """What to redact now, longest first: registered values and secret-named env values."""
    with _lock:
        registered = frozenset(_registered)
    return _ordered(registered, _env_secrets())


_env_seen: list[tuple[Any, frozenset[str]]] = []  # [(the environment's fingerprint, its secrets)]


def _env_secrets() -> frozenset[str]:
    """The values of secret-named environment variables, read again only when the
    environment changed (redaction runs on every stored text; decoding the whole
    environment each time was most of its cost)."""
    data = getattr(os.environ, "_data", None)  # CPython's encoded copy: no decoding to compare
    fingerprint = frozenset(data.items()) if isinstance(data, dict) else None
    seen = _env_seen[0] if _env_seen else None  # one read: another thread may replace it
    if fingerprint is not None and seen is not None and seen[0] == fingerprint:
        return seen[1]
    found = frozenset(v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 6)
    _env_seen[:] = [(fingerprint, found)]
    return found


@lru_cache(maxsize=16)
def _ordered(registered: frozenset[str], env: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(registered | env, key=len, reverse=True))


@lru_cache(maxsize=16)
def _anything(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern that matches wherever `_redact` would change the text: most text
    (a trace's fields, a model's answer) has nothing to redact, and one search says so."""
    scoped = [f"(?i:{p.pattern[4:]})" if p.pattern.startswith("(?i)") else f"(?:{p.pattern})" for p in _PATTERNS]
    return re.compile("|".join([*(re.escape(s) for s in secrets), *scoped]))


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    if not _anything(secrets).search(text):
        return text
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


def redact(text: str) -> str:
    return _redact(text, _secrets())


def redact_data(value: Any) -> Any:
    """A copy of `value` (JSON-like: dicts, lists, strings, numbers) with every string
    in it, keys included, passed through `redact`: for text a host stores or shows that
    a server or a model wrote (an endpoint check's answer, an error message, a trace),
    which may echo a key back."""
    return _redact_data(value, _secrets())


def _redact_data(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _redact(value, secrets)
    if isinstance(value, dict):
        return {_redact(k, secrets) if isinstance(k, str) else k: _redact_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_data(v, secrets) for v in value]
    return value


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{record.getMessage():<16} {pairs}".rstrip()
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(body, default=str))


def configure_logging(level: str = "warning", fmt: str = "text") -> None:
    if fmt not in ("text", "json"):
        raise ValueError("log format must be 'text' or 'json'")
    logger = logging.getLogger("packforge")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
