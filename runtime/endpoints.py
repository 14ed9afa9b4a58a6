"""Endpoint tools: `check_endpoint` (does it answer, does it honour a schema, how fast)
and the schema lint (which of a pack's schema keywords an endpoint's grammar mode is
known not to enforce, so the author knows which constraints only verification holds).

The lint table per mode is documented in docs/endpoints.md."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runtime.backends.base import ModelCall
from runtime.backends.config import OpenAIConfig
from runtime.confidence import allowed_values, value_confidence
from runtime.context_fit import FitReport, check_fit
from runtime.errors import BadSpec, PackforgeError
from runtime.logs import redact
from runtime.nodes import kind_names
from runtime.pack.model import Pack
from runtime.schemas import schema_validator

__all__ = ["CHECK_SCHEMA", "LINT_TABLE", "CheckResult", "LintWarning", "check_endpoint", "lint_pack", "lint_schema"]

# Keywords the grammar engines behind json_schema (llama.cpp's json-schema-to-grammar,
# xgrammar in vLLM and SGLang) do not turn into grammar: only verification holds them.
_NEVER = frozenset(
    {
        "multipleOf",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "format",
    }
)
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})

# mode -> (keywords never enforced, bounds not enforced on "number", bounds not enforced on "integer")
LINT_TABLE: dict[str, tuple[frozenset[str], bool, bool]] = {
    "json_schema": (_NEVER, True, False),
    "guided_json": (_NEVER, True, False),
    # llama-cpp-python's server: observed here to ignore minimum/maximum on integers too,
    # and its string grammar lets raw control characters through (verification rejects them).
    "json_object": (_NEVER, True, True),
}

CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"word": {"enum": ["zqx-amber", "zqx-violet"]}},
    "required": ["word"],
    "additionalProperties": False,
}
_CHECK_MESSAGES = [
    {"role": "system", "content": "Reply with one JSON object only."},
    {"role": "user", "content": "Reply with a JSON object that has one field."},
]


@dataclass(frozen=True)
class LintWarning:
    node: str
    path: str  # JSON pointer into grammars/<node>.json
    keyword: str
    mode: str

    def __str__(self) -> str:
        if self.mode == "none":
            return (
                f"node '{self.node}': grammar=none sends no schema; only verification holds grammars/{self.node}.json"
            )
        return (
            f"node '{self.node}': grammars/{self.node}.json {self.path or '/'}: '{self.keyword}' is not "
            f"enforced by grammar={self.mode}; only verification holds it"
        )


def _walk(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas"):
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield from _walk(child, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"):
        if isinstance(schema.get(key), dict):
            yield from _walk(schema[key], f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            for i, child in enumerate(schema[key]):
                yield from _walk(child, f"{path}/{key}/{i}")


def lint_schema(schema: dict[str, Any], mode: str, node: str = "") -> list[LintWarning]:
    """Keywords in `schema` that grammar mode `mode` is known not to enforce."""
    if mode == "none":
        return [LintWarning(node, "", "*", mode)]
    if mode == "gbnf":
        from runtime.backends._grammar import schema_to_gbnf

        return [LintWarning(node, p if p != "/" else "", k, mode) for p, k in schema_to_gbnf(schema).ignored]
    if mode not in LINT_TABLE:
        raise BadSpec(f"no lint table for grammar mode {mode!r}")
    never, number_bounds, integer_bounds = LINT_TABLE[mode]
    found: list[LintWarning] = []
    for path, sub in _walk(schema, ""):
        kinds = sub.get("type")
        kinds = set(kinds) if isinstance(kinds, list) else {kinds}
        for keyword in sub:
            if keyword in never or (
                keyword in _BOUNDS
                and (
                    (number_bounds and ("number" in kinds or None in kinds)) or (integer_bounds and "integer" in kinds)
                )
            ):
                found.append(LintWarning(node, path, keyword, mode))
        if mode == "json_object" and "string" in kinds:
            found.append(LintWarning(node, path, "string (raw control characters)", mode))
    return found


def lint_pack(pack: Pack, spec: str) -> list[LintWarning]:
    """Per node whose schema goes to the model (generate), the schema keywords the
    endpoint named by `spec` won't enforce."""
    mode = _grammar_mode(spec)
    asking = kind_names(asks_model=True)
    found: list[LintWarning] = []
    for node in pack.nodes.values():
        if node.kind in asking and node.schema is not None:
            found.extend(lint_schema(node.schema, mode, node.id))
    return found


def fit_pack(pack: Pack, spec: str) -> FitReport:
    """Every evalset case's request per generate node, counted by the endpoint named by
    `spec` against its context (runtime.context_fit)."""
    from runtime.backends.config import parse_openai_spec
    from runtime.backends.openai import OpenAIBackend

    _grammar_mode(spec)  # an openai: spec, or a clear error
    backend = OpenAIBackend(spec, parse_openai_spec(spec))
    try:
        return check_fit(pack, backend)
    finally:
        backend.close()


def _grammar_mode(spec: str) -> str:
    if not spec.startswith("openai:"):
        raise BadSpec(
            f"--endpoint {spec!r}: schema lint applies to openai: endpoints (scripted models send no grammar)"
        )
    from runtime.backends.config import parse_openai_spec

    return parse_openai_spec(spec).grammar


@dataclass
class CheckResult:
    spec: str
    grammar: str
    answered: bool
    honoured: bool | None  # None: no schema was sent (grammar=none) or no answer
    answer: str = ""
    finish_reason: str = ""
    latency_s: float = 0.0
    ttft_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    # Whether a second call, asking for logprobs, got them (None: not asked, no answer).
    # Not part of `ok`: without logprobs, confidence gates fall back to agreement.
    logprobs: bool | None = None
    logprobs_note: str = ""
    # Who serves the model (`GET /models` owned_by), and what that suggests for the spec.
    server: str | None = None
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.answered and self.honoured is not False

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        out = [f"endpoint   {self.spec}", f"grammar    {self.grammar}"]
        if not self.answered:
            out += [f"answers    no: {self.error}", "result     FAIL"]
            return out
        out.append(f"answers    yes (finish_reason {self.finish_reason})")
        if self.honoured is None:
            out.append("schema     not sent (grammar=none): only verification holds a pack's schemas")
        else:
            verdict = "honoured" if self.honoured else "NOT honoured"
            out.append(
                f"schema     {verdict}: the answer {self.answer[:80]!r} "
                f"{'is' if self.honoured else 'is not'} one of the enum's values"
            )
        ttft = f", first token {self.ttft_s:.3f} s" if self.ttft_s is not None else ""
        out.append(
            f"latency    {self.latency_s:.3f} s{ttft}; tokens {self.prompt_tokens} in, {self.completion_tokens} out"
        )
        note = f" ({self.logprobs_note})" if self.logprobs_note else ""
        if self.logprobs:
            out.append(f"logprobs   yes{note}")
        elif self.logprobs is False:
            out.append(f"logprobs   no{note} — without them confidence gates fall back to agreement")
        if self.server:
            out.append(f"server     {self.server}" + (f": {self.hint}" if self.hint else ""))
        out.append(f"result     {'OK' if self.ok else 'FAIL'}")
        return out


def check_endpoint(endpoint: OpenAIConfig | str) -> CheckResult:
    """One constrained call to the endpoint: does it answer, is the answer inside an enum
    the prompt never mentions (so only a grammar can produce it), and how fast. Retries
    are capped at 2 tries within 30 s so a dead server is reported quickly."""
    from runtime.backends.config import parse_openai_spec
    from runtime.backends.openai import OpenAIBackend

    if isinstance(endpoint, str):
        if not endpoint.startswith("openai:"):
            raise BadSpec("endpoints check takes an openai: spec, e.g. openai:http://127.0.0.1:8080/v1#MODEL")
        spec, config = endpoint, parse_openai_spec(endpoint)
    else:
        spec, config = endpoint.spec, endpoint
    config = dataclasses.replace(config, attempts=min(config.attempts, 2), deadline=min(config.deadline, 30.0))
    backend = OpenAIBackend(spec, config)
    call = ModelCall(
        run_id=f"check-{int(time.time())}",
        node="check",
        attempt=1,
        messages=_CHECK_MESSAGES,
        schema=CHECK_SCHEMA,
        max_tokens=128,
        temperature=0.0,
    )
    try:
        reply = backend.complete(call)
    except PackforgeError as exc:
        backend.close()
        return CheckResult(spec, config.grammar, answered=False, honoured=None, error=redact(str(exc)))
    try:
        logprobs, logprobs_note = _check_logprobs(backend, call)
        server = backend.server_owner()
    finally:
        backend.close()
    honoured: bool | None = None
    if config.grammar != "none":
        try:
            value = json.loads(reply.text)
        except json.JSONDecodeError:
            honoured = False
        else:
            honoured = schema_validator(CHECK_SCHEMA).is_valid(value)
    return CheckResult(
        spec,
        config.grammar,
        answered=True,
        honoured=honoured,
        answer=redact(reply.text),  # a server may echo the request (its Authorization header)
        finish_reason=reply.finish_reason,
        latency_s=reply.latency_s,
        ttft_s=reply.ttft_s,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        logprobs=logprobs,
        logprobs_note=logprobs_note,
        server=server,
        hint=_grammar_hint(server, config.grammar, config.prefill),
    )


def _grammar_hint(server: str | None, grammar: str, prefill: bool) -> str:
    """On llama.cpp's server, `json_schema`/`json_object` let the model spend tokens on
    layout; `grammar=gbnf` sends the compact grammar (docs/endpoints.md, Whitespace), and
    `prefill=true` has the answer's opening read instead of decoded (Prefill)."""
    if server != "llamacpp":
        return ""
    if grammar in ("json_schema", "json_object"):
        return (
            "llama.cpp's server; add ;grammar=gbnf;prefill=true to the spec for the compact grammar "
            "(no whitespace tokens: about 40% fewer answer tokens with SmolLM2) and the answer's "
            "opening read with the prompt instead of decoded (docs/endpoints.md)"
        )
    if grammar == "gbnf" and not prefill:
        return (
            "llama.cpp's server; add ;prefill=true to the spec: the answer's opening is read with the "
            "prompt instead of decoded (a third of a short answer's decoding with SmolLM2, docs/endpoints.md)"
        )
    return ""


def _check_logprobs(backend: Any, call: ModelCall) -> tuple[bool, str]:
    """Ask once more, for logprobs: does the endpoint return them, and do they spell the
    answer (what a confidence gate needs)?"""
    try:
        reply = backend.complete(dataclasses.replace(call, attempt=2, logprobs=True))
    except PackforgeError as exc:
        return False, redact(f"the request asking for them failed: {exc}")
    if not reply.logprobs:
        return False, "the answer came without them"
    try:
        value = json.loads(reply.text).get("word")
    except (json.JSONDecodeError, AttributeError):
        value = None
    allowed = allowed_values(CHECK_SCHEMA["properties"]["word"])
    greedy = call.temperature == 0
    found = value_confidence(reply.text, reply.logprobs, "word", value, allowed, greedy) if value is not None else None
    if found is None or found.p is None:
        return True, f"{len(reply.logprobs)} tokens; they do not spell a value of the check's enum"
    return True, f"{len(reply.logprobs)} tokens; p({value!r}) = {found.p:.3g}"
