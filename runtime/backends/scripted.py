"""Scripted models: `fake:FILE` answers from a JSON file; `sim:` adds seeded errors.

The script file:
    {"nodes":  {"classify": {"category": "billing"}},           # default per node
     "cases":  {"case-7": {"classify": {"category": "other"}}},  # per evalset case id
     "inputs": [{"match": {"ticket": "..."}, "answers": {...}}], # per input (subset match)
     "reasoning": "text returned to two_stage reasoning calls",
     "prices": {"input": 0.15, "output": 0.60}}                  # USD per million tokens
An answer is a JSON object (sent as its JSON text), a string (sent verbatim, e.g. to
script a malformed answer) or a list (the Nth call for that node in a run gets item N;
the last repeats).

Which answer a call gets (`Script.answer`): the call's case id's entry in `cases` for
its node, else the first `inputs` entry whose `match` the call's input holds (every key
equal) and that answers its node, else `nodes` for its node. A script that keys answers
by case or input (non-empty `cases` or `inputs`) answers only the inputs it was written
for: a call whose case id is not in `cases` and whose input matches no `inputs` entry
fails with BackendError (decision: never another case's answer; a model deployed on its
offline script must not answer every real input with one case's answer). Within a known
input, `nodes` is the default for a node its entry does not mention. A script with only
`nodes` is a constant model: it answers every input with the same per-node answer.

An answer object may carry `"$probs": {"FIELD": P, ...}`: how sure the scripted model is
of those fields' values, for exercising a `confidence:` gate offline. The key is never
part of the answer's text. When a call asks for logprobs (ModelCall.logprobs), a fake:
model answers with synthetic per-token logprobs: the text before, between and after the
named values is one token each at probability 1; a named value is two tokens (one when it
is a single character), the first at probability P with a runner-up at 1 - P (another of
the schema's enum values, the other boolean, else "<other>"), the rest at 1. An answer
without `$probs` comes back without logprobs, as from an endpoint that gives none. The
sim: model drops `$probs` and never returns logprobs."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

from runtime.backends.base import ModelCall, ModelReply, TokenLogprob, estimate_tokens
from runtime.backends.config import FakeConfig, SimConfig, parse_sim_options
from runtime.confidence import value_span
from runtime.errors import BackendError, BadSpec

PROBS_KEY = "$probs"


class Script:
    def __init__(self, path: Path, name: str | None = None) -> None:
        shown = name if name is not None else str(path)  # a pack's file is named as the pack names it
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BadSpec(f"scripted model file not found: {shown}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadSpec(f"scripted model file {shown} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise BadSpec(f"scripted model file {shown} must hold a JSON object")
        self.path = path
        self.name = name if name is not None else path.name  # as messages name it: never the folder it is in
        self.nodes: dict[str, Any] = data.get("nodes", {})
        self.cases: dict[str, dict[str, Any]] = data.get("cases", {})
        self.inputs: list[dict[str, Any]] = data.get("inputs", [])
        self.reasoning: str = data.get("reasoning", "Let me think about what the answer should be.")
        prices = data.get("prices", {})
        self.price_in = float(prices.get("input", 0.0))
        self.price_out = float(prices.get("output", 0.0))

    def answer(self, call: ModelCall) -> Any:
        """The scripted answer for `call` (module docstring); BackendError when the script
        keys answers by case or input and knows neither the call's case nor its input."""
        entry = self.cases.get(call.case_id) if call.case_id is not None else None
        if entry is not None and call.node in entry:
            found = entry[call.node]
        else:
            matched = [e for e in self.inputs if all(call.input.get(k) == v for k, v in e.get("match", {}).items())]
            if entry is None and not matched and (self.cases or self.inputs):
                raise BackendError(self._unknown_input(call.node))
            found = next((e["answers"][call.node] for e in matched if call.node in e.get("answers", {})), None)
            if found is None:  # a node the known input's entry does not mention: the default
                found = self.nodes.get(call.node)
        if found is None:
            case = f" for case '{call.case_id}'" if call.case_id else ""
            raise BackendError(f"scripted model {self.name} has no answer for node '{call.node}'{case}")
        if isinstance(found, list):
            found = found[min(call.attempt, len(found)) - 1] if found else None
        return found

    def _unknown_input(self, node: str) -> str:
        known = " and ".join(f"{len(v)} {k}" for k, v in (("cases", self.cases), ("inputs", self.inputs)) if v)
        return (
            f"scripted model {self.name} has no answer for node '{node}': the input matches none of its {known}; "
            "a scripted model only answers the inputs it was written for (use a real model, e.g. "
            "--model openai:..., for other inputs)"
        )

    def reply(self, call: ModelCall, text: str) -> ModelReply:
        prompt_tokens = sum(estimate_tokens(m["content"]) for m in call.messages)
        completion_tokens = estimate_tokens(text)
        cost = (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1e6
        return ModelReply(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            request_id=call.request_id,
        )


def _text(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer)


def _split_probs(answer: Any, script: Path) -> tuple[Any, dict[str, float] | None]:
    """The answer without its `$probs`, and the `$probs` (checked)."""
    if not isinstance(answer, dict) or PROBS_KEY not in answer:
        return answer, None
    answer = dict(answer)
    probs = answer.pop(PROBS_KEY)
    if not isinstance(probs, dict) or not all(
        isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p <= 1 for p in probs.values()
    ):
        raise BackendError(
            f"scripted model {script.name}: {PROBS_KEY} must map field names to probabilities above 0 and at most 1"
        )
    return answer, {str(k): float(v) for k, v in probs.items()}


def _log(p: float) -> float:
    return math.log(p) if p > 0 else float("-inf")


def _runner_up(field: str, value: Any, first: str, schema: dict[str, Any] | None) -> str:
    if isinstance(value, bool):
        return json.dumps(not value)
    prop = ((schema or {}).get("properties") or {}).get(field) or {}
    for other in prop.get("enum") or []:
        if other != value:
            text = other if isinstance(other, str) else json.dumps(other)
            guess = text[: len(first)]
            return guess if guess and guess != first else text
    return "<other>"


def synthetic_logprobs(text: str, probs: dict[str, float], schema: dict[str, Any] | None) -> list[TokenLogprob]:
    """Per-token logprobs for `text` that give each field named in `probs` its
    probability (see the module docstring); the tokens spell `text` exactly."""
    spans = sorted(
        (found[0], found[1], name, found[2])
        for name in probs
        if (found := value_span(text, name)) is not None and found[1] > found[0]
    )
    tokens: list[TokenLogprob] = []
    at = 0
    for start, end, name, value in spans:
        if start < at:
            continue  # overlapping spans cannot happen in one JSON object; be safe
        if start > at:
            tokens.append(TokenLogprob(text[at:start], 0.0, [(text[at:start], 0.0)]))
        cut = start + max(1, (end - start) // 2)
        first = text[start:cut]
        p = probs[name]
        top = [(first, _log(p)), (_runner_up(name, value, first, schema), _log(1 - p))]
        tokens.append(TokenLogprob(first, _log(p), top))
        if cut < end:
            tokens.append(TokenLogprob(text[cut:end], 0.0, [(text[cut:end], 0.0)]))
        at = end
    if at < len(text):
        tokens.append(TokenLogprob(text[at:], 0.0, [(text[at:], 0.0)]))
    return tokens


class FakeBackend:
    """Answers exactly what the script says."""

    def __init__(self, script: Script, spec: str) -> None:
        self.script = script
        self.spec = spec

    def complete(self, call: ModelCall) -> ModelReply:
        if call.purpose == "reasoning":
            return self.script.reply(call, self.script.reasoning)
        answer, probs = _split_probs(self.script.answer(call), self.script.path)
        text = _text(answer)
        reply = self.script.reply(call, text)
        if call.logprobs and probs is not None:
            reply.logprobs = synthetic_logprobs(text, probs, call.schema)
        return reply

    def close(self) -> None:
        pass


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts, stable across processes."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return float(struct.unpack(">Q", digest)[0] / 2**64)


class SimBackend:
    """Answers correctly (from a script) except with probability `error` per call.

    Whether a call errs depends only on (seed, run, node, attempt), so two arms of a
    benchmark that make the same calls see the same errors."""

    def __init__(self, script: Script, spec: str, error: float, seed: int, invalid: float) -> None:
        self.script = script
        self.spec = spec
        self.error = error
        self.seed = seed
        self.invalid = invalid

    def complete(self, call: ModelCall) -> ModelReply:
        if call.purpose == "reasoning":
            return self.script.reply(call, self.script.reasoning)
        correct, _ = _split_probs(self.script.answer(call), self.script.path)
        key = (self.seed, call.run_id, call.node, call.attempt)
        if unit_hash(*key) >= self.error:
            return self.script.reply(call, _text(correct))
        if unit_hash(*key, "mode") < self.invalid:
            return self.script.reply(call, _text(correct)[: max(1, len(_text(correct)) // 2)])
        return self.script.reply(call, json.dumps(perturb(correct, call.schema, unit_hash(*key, "pick"))))

    def close(self) -> None:
        pass


def perturb(answer: Any, schema: dict[str, Any] | None, u: float) -> Any:
    """A wrong answer of the same shape: one field changed."""
    if not isinstance(answer, dict) or not answer:
        return {"wrong": True}
    out = copy.deepcopy(answer)
    keys = sorted(out)
    key = keys[int(u * len(keys))]
    props = (schema or {}).get("properties", {}).get(key, {})
    value = out[key]
    enum = props.get("enum")
    if enum and len(enum) > 1:
        choices = [v for v in enum if v != value]
        out[key] = choices[int(u * 997) % len(choices)]
    elif isinstance(value, bool):
        out[key] = not value
    elif isinstance(value, (int, float)):
        out[key] = value + 1 + int(u * 997) % 5
    elif isinstance(value, str):
        out[key] = value + "?" if value else "?"
    elif isinstance(value, list):
        out[key] = value[:-1] if value else [None]
    else:
        out[key] = None
    return out


# The name studio code has imported: the options of a sim: spec body, as strings.
parse_sim_spec = parse_sim_options


def _resolve(path: str, base_dir: Path | None) -> Path:
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists() or base_dir is None:
        return candidate
    return base_dir / candidate


def pack_file(path: str, pack_dir: Path) -> Path:
    """The file `path` names inside the pack at `pack_dir`, strictly: relative, and no
    way out of the pack (`..`, a link). Never looks at the current directory, so a pack
    cannot read, or learn whether there is, a file of the machine it runs on. Raises
    BadSpec naming `path` as the pack wrote it (never the folder the pack is in)."""
    candidate = Path(path)
    root = Path(pack_dir).resolve()
    if not path or candidate.is_absolute() or not (root / candidate).resolve().is_relative_to(root):
        raise BadSpec(f"the pack's scripted model {path!r} must name a file inside the pack")
    return (root / candidate).resolve()


def _script(path: str, base_dir: Path | None, own: bool) -> Script:
    """The script a spec names. The pack's own model (`own`: the spec opened is the
    manifest's) is a file of the pack, resolved by `pack_file`; a spec the host gives
    (the CLI's --model, a studio endpoint) resolves against the current directory, then
    the pack's."""
    if own and base_dir is not None:
        return Script(pack_file(path, base_dir), path)
    return Script(_resolve(path, base_dir))


def open_fake(config: FakeConfig, label: str, base_dir: Path | None, default: str | None) -> FakeBackend:
    """The `fake` backend kind's opener (runtime.backends.BACKEND_KINDS)."""
    return FakeBackend(_script(config.file, base_dir, own=label == default), label)


def open_sim(config: SimConfig, label: str, base_dir: Path | None, default: str | None) -> SimBackend:
    """The `sim` backend kind's opener: without `base`, the pack's own fake: model
    (`default`) holds the correct answers."""
    base = config.base
    own = label == default
    if base is None:
        if default is None or not default.startswith("fake:"):
            raise BadSpec(
                "sim: needs base=FILE (a scripted model with the correct answers) "
                "when the pack's default model is not fake:FILE"
            )
        base, own = default.removeprefix("fake:"), True
    return SimBackend(_script(base, base_dir, own), label, config.error, config.seed, config.invalid)
