"""Backend configurations: one frozen dataclass per backend kind, parsed from a spec
string only at the edges (the CLI's --model, a pack manifest's `model`) and built
directly everywhere else (the studio builds one from an endpoint row).

    fake:FILE                             FakeConfig(file)
    sim:error=P,seed=N,invalid=Q,base=FILE SimConfig(error, seed, invalid, base)
    openai:BASE_URL#MODEL[;key=value]...  OpenAIConfig(base_url, model, ...)

`config.spec` renders a config back to its spec string (options at their defaults
left out). The table that opens each kind is runtime.backends.BACKEND_KINDS."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from runtime.errors import BadSpec

GRAMMAR_MODES = ("json_schema", "json_object", "guided_json", "gbnf", "none")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class BackendConfig:
    """How to open one model backend. Subclasses are frozen dataclasses with a `kind`
    (the spec scheme, a key of runtime.backends.BACKEND_KINDS)."""

    kind: ClassVar[str]

    @property
    def spec(self) -> str:
        """The spec string that parses back to this config."""
        raise NotImplementedError


@dataclass(frozen=True)
class FakeConfig(BackendConfig):
    """A scripted model that answers what its JSON file says (`fake:FILE`). The pack's
    own model (the manifest's spec) names a file inside the pack, resolved there only
    (runtime.backends.scripted.pack_file); a spec the host gives resolves a relative
    file against the current directory, then the pack's directory."""

    kind: ClassVar[str] = "fake"
    file: str

    @property
    def spec(self) -> str:
        return f"fake:{self.file}"


@dataclass(frozen=True)
class SimConfig(BackendConfig):
    """A scripted model that errs with probability `error` per call, seeded (`sim:...`).
    `invalid` is the share of errors that are malformed rather than wrong answers;
    `base` is the script with the correct answers (default: the pack's own fake: model)."""

    kind: ClassVar[str] = "sim"
    error: float = 0.1
    seed: int = 0
    invalid: float = 0.2
    base: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.error <= 1.0 or not 0.0 <= self.invalid <= 1.0:
            raise BadSpec("sim error and invalid must be between 0 and 1")

    @property
    def spec(self) -> str:
        parts = [f"error={self.error:g}", f"seed={self.seed}", f"invalid={self.invalid:g}"]
        if self.base is not None:
            parts.append(f"base={self.base}")
        return "sim:" + ",".join(parts)


def parse_fake_spec(spec: str) -> FakeConfig:
    body = spec.partition(":")[2]
    if not body:
        raise BadSpec("fake: needs a file, e.g. fake:fakes/scripted.json")
    return FakeConfig(body)


def parse_sim_options(body: str) -> dict[str, str]:
    """`name=value,...` of a sim: spec, as strings."""
    options: dict[str, str] = {}
    for part in filter(None, body.split(",")):
        name, sep, value = part.partition("=")
        if not sep:
            raise BadSpec(f"sim option {part!r} must look like name=value")
        options[name.strip()] = value.strip()
    unknown = set(options) - {"error", "seed", "base", "invalid"}
    if unknown:
        raise BadSpec(f"unknown sim option(s) {', '.join(sorted(unknown))}; known: error, seed, base, invalid")
    return options


def parse_sim_spec(spec: str) -> SimConfig:
    options = parse_sim_options(spec.partition(":")[2])
    try:
        error = float(options.get("error", "0.1"))
        seed = int(options.get("seed", "0"))
        invalid = float(options.get("invalid", "0.2"))
    except ValueError as exc:
        raise BadSpec(f"bad sim option value: {exc}") from None
    return SimConfig(error=error, seed=seed, invalid=invalid, base=options.get("base"))


@dataclass(frozen=True)
class OpenAIConfig(BackendConfig):
    """An OpenAI-compatible chat-completions endpoint (`openai:BASE_URL#MODEL;key=value`).
    Defaults are documented in docs/endpoints.md. `key_env` names the environment
    variable that holds the key; the key itself is never part of a config."""

    kind: ClassVar[str] = "openai"

    base_url: str
    model: str
    grammar: str = "json_schema"
    key_env: str | None = None
    concurrency: int = 4
    attempts: int = 6
    deadline: float = 120.0
    timeout: float = 60.0
    backoff: float = 0.5
    jitter: bool = True
    price_in: float = 0.0
    price_out: float = 0.0
    usage: bool = True
    strict: bool = False
    request_id: str = "plain"
    compact: bool = True  # grammar=gbnf: no whitespace inside the JSON (docs/endpoints.md)
    queue_wait: float = 600.0  # seconds a call may wait for one of `concurrency` slots; not part of `deadline`
    max_answer_bytes: int = 16 << 20  # bytes of one answer's stream read at most; past it the call is rejected
    slots: int = 0  # llama-server's -np: >0 pins each run to one server slot (id_slot) to reuse its prompt cache
    lookahead: int = 0  # calls a run may make ahead for independent nodes (runtime.lookahead); below concurrency
    prefill: bool = False  # grammar=gbnf: the answer's fixed opening is written ahead of the model (docs/endpoints.md)

    def __post_init__(self) -> None:
        if self.prefill and self.grammar != "gbnf":
            raise BadSpec(
                f"prefill=true needs grammar=gbnf (this endpoint has grammar={self.grammar}): the rest of the "
                "answer after its opening is sent as a llama.cpp grammar"
            )
        if self.lookahead and self.slots and self.lookahead >= self.slots:
            raise BadSpec(
                f"lookahead={self.lookahead} must be below slots={self.slots}: each call made ahead "
                "takes a llama-server slot beside the run's own"
            )
        if self.lookahead >= self.concurrency:
            raise BadSpec(
                f"lookahead={self.lookahead} must be below concurrency={self.concurrency}: "
                "a run's own call needs a slot beside the calls it makes ahead"
            )

    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    @property
    def spec(self) -> str:
        defaults = OpenAIConfig(base_url=self.base_url, model=self.model)
        options = [
            f";{f.name}={_render(getattr(self, f.name))}"
            for f in fields(self)
            if f.name in _OPTIONS and getattr(self, f.name) != getattr(defaults, f.name)
        ]
        return f"openai:{self.base_url}#{self.model}" + "".join(options)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}" if float(f"{value:g}") == value else repr(value)
    return str(value)


def _bool(value: str) -> bool:
    low = value.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _number(low: float, high: float, kind: type = float) -> Any:
    def parse(value: str) -> Any:
        number = kind(value)
        if not low <= number <= high:
            raise ValueError(f"must be from {low:g} to {high:g}")
        return number

    return parse


def _grammar(value: str) -> str:
    if value not in GRAMMAR_MODES:
        raise ValueError(f"must be one of {', '.join(GRAMMAR_MODES)}")
    return value


def _request_id(value: str) -> str:
    if value not in ("plain", "uuid"):
        raise ValueError("must be plain (X-Request-ID: run.node.attempt) or uuid (for servers that demand one)")
    return value


class _SecretValueError(ValueError):
    """A bad key_env value: it may be a key pasted by mistake, so it is never echoed."""


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise _SecretValueError(
            "must be the NAME of an environment variable, in capitals (e.g. PROVIDER_API_KEY); "
            "the key itself never goes in a spec"
        )
    return value


_OPTIONS: dict[str, Any] = {
    "grammar": _grammar,
    "key_env": _env_name,
    "concurrency": _number(1, 1024, int),
    "attempts": _number(1, 100, int),
    "deadline": _number(0.001, 86400),
    "timeout": _number(0.001, 3600),
    "backoff": _number(0.0, 60),
    "jitter": _bool,
    "price_in": _number(0, 1e6),
    "price_out": _number(0, 1e6),
    "usage": _bool,
    "strict": _bool,
    "request_id": _request_id,
    "compact": _bool,
    "queue_wait": _number(0.001, 86400),
    "slots": _number(0, 1024, int),
    "lookahead": _number(0, 64, int),
    "max_answer_bytes": _number(1024, 1 << 30, int),
    "prefill": _bool,
}


def parse_openai_spec(spec: str) -> OpenAIConfig:
    """Parse `openai:BASE_URL#MODEL[;key=value]...` without touching the network or env."""
    body = spec.removeprefix("openai:")
    url, sep, fragment = body.partition("#")
    parts = fragment.split(";")
    model = parts[0].strip()
    if not sep or not model:
        raise BadSpec(f"openai spec {spec!r} needs a model after '#': openai:http://HOST:PORT/v1#MODEL")
    if not re.match(r"^https?://[^/\s]+", url):
        raise BadSpec(f"openai spec {spec!r}: the base URL must start with http:// or https://")
    values: dict[str, Any] = {}
    for part in parts[1:]:
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise BadSpec(f"openai spec option {part!r} is not key=value with a known key ({known})")
        if key in values:
            raise BadSpec(f"openai spec option {key!r} is given twice")
        try:
            values[key] = _OPTIONS[key](value.strip())
        except _SecretValueError as exc:
            raise BadSpec(f"openai spec option {key}: {exc}") from None
        except ValueError as exc:
            raise BadSpec(f"openai spec option {key}={value!r}: {exc}") from None
    return OpenAIConfig(base_url=url.rstrip("/"), model=model, **values)
