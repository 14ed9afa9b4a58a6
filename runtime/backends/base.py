"""The model backend interface. Backends are chosen by a spec string (see registry)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ModelCall:
    """One request to a model for one attempt at one node."""

    run_id: str
    node: str
    attempt: int
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None  # None: unconstrained (the reasoning stage of two_stage)
    max_tokens: int = 256
    temperature: float = 0.0
    case_id: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    purpose: str = "answer"  # "answer" | "reasoning"
    cancel: threading.Event | None = None
    logprobs: bool = False  # ask for per-token log probabilities (confidence gates)
    # Values the answer already holds, which `schema` does not ask for (a quorum's settled
    # fields, runtime.nodes.sure_fields): an endpoint with `prefill=true` writes them ahead
    # of the model as the answer's first members; any other leaves them out.
    given: dict[str, Any] | None = None
    # A call made ahead of its node (runtime.lookahead): `lane` > 0 picks another
    # llama-server slot than the run's own; `spare` sends it only on a free slot of the
    # endpoint's cap, else it fails at once (NoSpareSlot) instead of queueing.
    lane: int = 0
    spare: bool = False

    @property
    def request_id(self) -> str:
        suffix = ("r" if self.purpose == "reasoning" else "") + ("a" if self.lane else "")
        return f"{self.run_id}.{self.node}.{self.attempt}{suffix}"


@dataclass
class TokenLogprob:
    """One generated token: its text, its natural-log probability, and the most likely
    tokens at that position (`top`: (token, logprob) pairs, best first, the chosen token
    among them when the server lists it)."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class ModelReply:
    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    # Of prompt_tokens, how many the server took from its prompt cache instead of reading
    # (llama-server's timings.cache_n, OpenAI-style usage.prompt_tokens_details.cached_tokens);
    # None: the server did not say.
    cached_tokens: int | None = None
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    latency_s: float = 0.0
    ttft_s: float | None = None
    cost_usd: float = 0.0
    request_id: str = ""
    reasoning_text: str | None = None
    logprobs: list[TokenLogprob] | None = None  # None: not asked for, or the server gave none


class Backend(Protocol):
    """A model. `complete` raises BackendError when no answer can be had."""

    spec: str

    def complete(self, call: ModelCall) -> ModelReply: ...

    def close(self) -> None: ...


def estimate_tokens(text: str) -> int:
    """A token count for scripted models, which have no tokenizer (about 4 chars/token)."""
    return max(1, (len(text) + 3) // 4)
