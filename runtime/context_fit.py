"""Does every evalset case fit the endpoint's context? (`packforge validate --endpoint`)

For each evalset case and each generate node, the request the node would send is built
as a run builds it (runtime.messages, with the case's expected values standing in for
what earlier nodes write, as few-shot examples are rendered) and its tokens are counted
by the server itself, against the context of one of its slots:

- llama-server: the context from `GET /props` (`default_generation_settings.n_ctx`, the
  size of one slot: `-c` divided by `-np`), the prompt from `POST /apply-template` (the
  model's own chat template) and its tokens from `POST /tokenize`;
- vLLM: `POST /tokenize` with the messages answers `count` and `max_model_len`.

A server that answers neither is reported as not checked: a count from characters
would be wrong by the tokenizer's ratio, and a wrong warning is worse than none. Runs
never count tokens before a call (the server refuses an over-long request in one quick
round trip, docs/pack-format.md "truncate"); this check is how an evalset shows an
input that needs a `truncate:` rule before an eval spends its calls on it.

Per node and case, one of:
- the request does not fit even without its few-shot examples: the run would fail the
  node; the warning names the input field and the `truncate:` rule to write;
- it fits only without its examples: the run drops them (the farthest first);
- the request fits but leaves less room than the node's `max_tokens`: the answer may be
  cut short (finish_reason `length`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.messages import build_messages, truncate_advice

if TYPE_CHECKING:
    from runtime.backends.openai import OpenAIBackend
    from runtime.pack.model import Case, Node, Pack

MAX_WARNINGS = 20  # reported at most; the count of the rest is given


@dataclass
class FitReport:
    context: int | None  # tokens of one server slot; None: the server did not say
    counted: int = 0  # requests counted
    warnings: list[str] = field(default_factory=list)
    more: int = 0  # warnings past MAX_WARNINGS
    note: str = ""  # why nothing was checked


class ServerTokens:
    """The server's context and token counts, through the backend's own client."""

    def __init__(self, backend: OpenAIBackend) -> None:
        self.backend = backend
        self.root = backend.server_root
        props = backend.probe("GET", self.root + "/props")
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        self.kind = "llama-server" if isinstance(n_ctx, int) and n_ctx > 0 else None
        self.context: int | None = n_ctx if self.kind else None
        if self.kind is None:
            answer = self._vllm([{"role": "user", "content": "hi"}])
            if answer is not None:
                self.kind, self.context = "vllm", answer[1]

    def count(self, messages: list[dict[str, str]]) -> int | None:
        if self.kind == "llama-server":
            applied = self.backend.probe("POST", self.root + "/apply-template", {"messages": messages})
            prompt = applied.get("prompt") if isinstance(applied, dict) else None
            if not isinstance(prompt, str):
                return None
            tokens = self.backend.probe("POST", self.root + "/tokenize", {"content": prompt})
            ids = tokens.get("tokens") if isinstance(tokens, dict) else None
            return len(ids) if isinstance(ids, list) else None
        answer = self._vllm(messages) if self.kind == "vllm" else None
        return answer[0] if answer is not None else None

    def _vllm(self, messages: list[dict[str, str]]) -> tuple[int, int] | None:
        body = {"model": self.backend.config.model, "messages": messages}
        answer = self.backend.probe("POST", self.root + "/tokenize", body)
        if not isinstance(answer, dict):
            return None
        count, limit = answer.get("count"), answer.get("max_model_len")
        return (count, limit) if isinstance(count, int) and isinstance(limit, int) and limit > 0 else None


def check_fit(pack: Pack, backend: OpenAIBackend) -> FitReport:
    """Every evalset case's request per generate node, counted against the server's context."""
    tokens = ServerTokens(backend)
    report = FitReport(tokens.context)
    if tokens.context is None or tokens.count([{"role": "user", "content": "hi"}]) is None:
        report.note = (
            "context not checked: the endpoint answers neither llama-server's /props, /apply-template and "
            "/tokenize nor vLLM's /tokenize, and a count from characters would be a guess"
        )
        return report
    nodes = [n for n in pack.nodes.values() if n.kind == "generate" and n.prompt is not None]
    for case in pack.cases:
        for node in nodes:
            problem = _problem(pack, node, case, tokens, tokens.context, report)
            if problem is None:
                continue
            if len(report.warnings) < MAX_WARNINGS:
                report.warnings.append(f"evalset.jsonl:{case.line}: case '{case.id}', node '{node.id}': {problem}")
            else:
                report.more += 1
    return report


def _problem(pack: Pack, node: Node, case: Case, tokens: ServerTokens, context: int, report: FitReport) -> str | None:
    state: dict[str, Any] = dict(case.expected or {})
    messages = build_messages(pack, node, state, case.input).messages
    full = tokens.count(messages)
    report.counted += 1
    if full is None:
        return "the server did not count this request's tokens"
    if full + node.max_tokens <= context:
        return None
    if full < context:
        return (
            f"the request is {full} tokens: {context - full} are left of the context of {context} for an answer "
            f"of up to {node.max_tokens} (max_tokens); the answer may be cut short"
        )
    bare, alone = messages, full
    if len(messages) > 2:
        bare = [messages[0], messages[-1]]
        alone = tokens.count(bare) or full
        report.counted += 1
        if alone < context:
            return (
                f"the request is {full} tokens, over the context of {context}; without its few-shot examples it "
                f"is {alone}, so the run drops examples (the farthest first) to fit"
            )
    chars = sum(len(m["content"]) for m in bare)
    advice = truncate_advice(pack, node, case.input, alone + node.max_tokens - context, chars / max(alone, 1))
    head = f"the request is {full} tokens, over the context of {context} even without few-shot examples"
    return f"{head}; {advice}" if advice else head
