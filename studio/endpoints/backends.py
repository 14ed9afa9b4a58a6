"""The studio's calls into the runtime for model endpoints: validate a spec, open one,
check one.

An endpoint row keeps its spec string and, in their own fields, the name of the
environment variable that holds its key, its prices and its concurrency cap. Opening
it builds the runtime's backend config from the row (`config_for`): the spec parsed,
those fields set on an `OpenAIConfig`, so the runtime reads the key from the
environment of the process that opens it; the key itself is never stored, shown or
logged. `spec_for` renders the same settings as a spec string, the record a run or an
eval keeps of the model it was started on."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from http import HTTPStatus
from pathlib import Path
from typing import Any

from django.utils import timezone

from runtime import Backend, BackendConfig, BadSpec, OpenAIConfig, check_endpoint, open_backend, parse_backend_spec
from studio.endpoints.keys import key_env_problem
from studio.endpoints.models import Endpoint
from studio.redaction import stored

log = logging.getLogger("packforge.studio.endpoints")

# Options that have their own field on the row; giving them in the spec too would be
# two sources of truth for one value.
OWN_FIELDS = {"key_env": "Key env var", "price_in": "Price in", "price_out": "Price out", "concurrency": "Concurrency"}


def plain_number(value: object) -> str:
    """0.15 for Decimal('0.1500'), 2 for Decimal('2.0000'): prices as a person writes them."""
    text = format(value, "f") if not isinstance(value, int) else str(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def opening_spec(
    spec: str, *, key_env: str = "", price_in: object = 0, price_out: object = 0, concurrency: int | None = None
) -> str:
    """The spec string the runtime opens: for `openai:` endpoints, the row's own fields
    appended as options. Scripted models (`fake:`, `sim:`) take none of them."""
    if not spec.startswith("openai:"):
        return spec
    options = []
    if key_env:
        options.append(f"key_env={key_env}")
    if concurrency is not None:
        options.append(f"concurrency={concurrency}")
    options.append(f"price_in={plain_number(price_in)}")
    options.append(f"price_out={plain_number(price_out)}")
    return spec + "".join(f";{o}" for o in options)


def spec_for(endpoint: Endpoint) -> str:
    return opening_spec(
        endpoint.spec,
        key_env=endpoint.key_env,
        price_in=endpoint.price_in,
        price_out=endpoint.price_out,
        concurrency=endpoint.concurrency,
    )


def config_for(endpoint: Endpoint) -> BackendConfig:
    """The runtime's config for an endpoint row: its spec, with the row's key env var,
    prices and concurrency for an `openai:` endpoint (scripted models take none of
    them). Raises BadSpec for a spec the runtime cannot parse, and for a key variable the
    studio's allowlist does not hold (studio/endpoints/keys.py): checked on every open,
    not only on save, so a row saved under an older or wider rule sends no key."""
    problem = key_env_problem(endpoint.key_env)
    if problem:
        raise BadSpec(f"endpoint {endpoint.name!r}: {problem}")
    config = parse_backend_spec(endpoint.spec.strip())
    if not isinstance(config, OpenAIConfig):
        return config
    return replace(
        config,
        key_env=endpoint.key_env or None,
        price_in=float(endpoint.price_in or 0),
        price_out=float(endpoint.price_out or 0),
        concurrency=endpoint.concurrency if endpoint.concurrency is not None else config.concurrency,
    )


def spec_problem(spec: str, key_env: str = "", concurrency: int | None = None) -> str | None:
    """Why `spec` cannot be saved, or None. The spec is opened by the runtime (so every
    syntax rule is the runtime's own), with the row's `concurrency` in place of its own;
    the key is not looked up here, because the web process need not hold it: the worker
    that runs the endpoint does."""
    spec = spec.strip()
    if spec.startswith("openai:"):
        try:
            config = parse_backend_spec(spec)
            if concurrency is not None and isinstance(config, OpenAIConfig):
                replace(config, concurrency=concurrency)  # lookahead must stay below it
        except BadSpec as exc:
            return str(exc)
        given = _given_options(spec)
        for option, label in OWN_FIELDS.items():
            if option in given:
                return f"set {option} in the '{label}' field, not in the spec"
    elif key_env:
        return "only openai: endpoints take a key; clear the key env var for a scripted model"
    try:
        backend = open_backend(spec)
    except BadSpec as exc:
        return str(exc)
    backend.close()
    return None


def _given_options(spec: str) -> set[str]:
    fragment = spec.partition("#")[2]
    return {part.partition("=")[0].strip() for part in fragment.split(";")[1:] if "=" in part}


def open_endpoint(endpoint: Endpoint, *, base_dir: Path | None = None, default: str | None = None) -> Backend:
    """Open the backend an endpoint names. Raises BadSpec (for instance when the key's
    environment variable is not set in this process)."""
    return open_backend(config_for(endpoint), base_dir=base_dir, default=default)


def check(endpoint_id: int) -> dict[str, Any] | None:
    """One constrained call to the endpoint (runtime.endpoints.check_endpoint); the
    result, with the time it was taken, is stored in `last_check` and returned."""
    endpoint = Endpoint.objects.filter(pk=endpoint_id).first()
    if endpoint is None:
        log.warning("endpoint %s is gone; nothing to check", endpoint_id)
        return None
    started = timezone.now()
    try:
        config = config_for(endpoint)
        if not isinstance(config, OpenAIConfig):
            raise BadSpec("endpoints check takes an openai: spec, e.g. openai:http://127.0.0.1:8080/v1#MODEL")
        result: dict[str, Any] = check_endpoint(config).to_dict()
    except BadSpec as exc:
        result = {"ok": False, "answered": False, "honoured": None, "error": str(exc)}
    result.pop("spec", None)  # the row shows its own spec; this one carries the options
    result = without_server_text(result)
    result.update(state="done", checked_at=started.isoformat())
    result = stored(result)  # a server that echoes the request would hand back its key
    Endpoint.objects.filter(pk=endpoint_id).update(last_check=result)
    return result


# Where a runtime error quotes what the server said: after an HTTP status, and an error
# the server sent inside a 200 stream.
_HTTP_STATUS = re.compile(r"HTTP (\d{3})\b")
_IN_BAND = "in-band error"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9._-]{1,40}$")


def status_line(text: str) -> str:
    """`text` (a runtime error) cut to its status line: everything up to `HTTP nnn` and
    the status's name, never the body the server sent with it."""
    found = _HTTP_STATUS.search(text)
    if found:
        code = int(found.group(1))
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else ""
        return f"{text[: found.end()]} {phrase}".rstrip() + " (the server's answer is not shown)"
    cut = text.find(_IN_BAND)
    if cut >= 0:
        return text[: cut + len(_IN_BAND)] + " (the server's text is not shown)"
    return text


def without_server_text(result: dict[str, Any]) -> dict[str, Any]:
    """A check's result as the studio stores and shows it: no text the server wrote
    beyond a status line. A check may point at any URL (with the endpoint's key), so what
    it shows must not turn it into a way to read another server's pages. The answer is
    kept only when it is one of the check's own enum words (honoured); otherwise only its
    length is."""
    shown = dict(result)
    for field in ("error", "logprobs_note"):
        if isinstance(shown.get(field), str):
            shown[field] = status_line(shown[field])
    answer = shown.get("answer")
    if isinstance(answer, str) and answer and shown.get("honoured") is not True:
        shown["answer"] = ""
        shown["answer_chars"] = len(answer)
    server = shown.get("server")
    if isinstance(server, str) and not _SERVER_NAME.match(server):
        shown["server"] = None
    return shown
