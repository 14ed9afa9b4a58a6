"""What a node kind is, and everything a kind module needs from the rest of the runtime.

A kind module imports this module (and leaf modules such as runtime.verify), never the
walker or the loader: what it needs of a run in progress is `RunContext` (the walker's
`Walk` provides it), what it needs while loading is `LoadContext` (the loader's
`NodeLoader` provides it). The registry is runtime/nodes/__init__.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.backends.base import ModelReply
    from runtime.errors import PackIssue
    from runtime.expr import Expression
    from runtime.journal import ToolPayload
    from runtime.nodes.sure_fields import PartialAsk
    from runtime.pack.model import Node, Pack, RetryPolicy
    from runtime.templates import Template
    from runtime.tools import Registry, ToolOutcome

COMMON_KEYS = frozenset({"kind", "reads", "writes", "description"})


def covered(ref: str, reads: tuple[str, ...] | frozenset[str] | set[str]) -> bool:
    """Whether the field path `ref` is inside one of `reads` ('a.b' is inside 'a')."""
    return any(ref == r or ref.startswith(r + ".") for r in reads)


@dataclass
class Outcome:
    """What running a node produced. The walker commits, routes and checkpoints it."""

    status: str  # "ok" | "fail" | "unsure" | "wait" | "end"
    writes: dict[str, Any] = field(default_factory=dict)
    attempt: int = 0
    reason: str = ""
    prompt: str = ""  # the rendered prompt, for the trace
    confidence: dict[str, Any] | None = None  # runtime.confidence.Confidence as a dict (confidence gates)
    prior: dict[str, Any] | None = None  # a label prior's correction (runtime.prior.apply_prior)
    notes: list[str] = field(default_factory=list)  # short facts for the trace (e.g. input fields cut)
    tool_stats: dict[str, Any] | None = None  # a choose_tool visit's counters (Step.tool_stats)
    context: bool = False  # failed because the request does not fit the model's context
    least_p: float | None = None  # the least likely token's probability in the answer (a quorum's `sure`)
    partial: PartialAsk | None = None  # with `sure_fields`: what the draws after this first one ask for


@dataclass(frozen=True)
class NodeDrawing:
    """How a node of a kind is drawn, for every renderer of a pack's graph.

    `shape`: the outline, one of NODE_SHAPES: "rounded" (a rectangle with rounded
    corners), "hexagon", "barred" (a rectangle with a bar inside each side), "ellipse",
    "stadium" (a pill with an inner outline). `css_class`: the class on the node's SVG
    group (the studio's stylesheet colours it). `label`: the word under the node's id.
    `mermaid`: the opening and closing brackets of the node in Mermaid."""

    shape: str
    css_class: str
    label: str
    mermaid: tuple[str, str]


NODE_SHAPES = ("rounded", "hexagon", "barred", "ellipse", "stadium")
# How a node whose kind is not registered (an old pack, a typo shown in the editor) is drawn.
OTHER_DRAWING = NodeDrawing(shape="rounded", css_class="node-other", label="other", mermaid=('["', '"]'))


class RunContext(Protocol):
    """What a node kind may use of a run in progress (runtime.walk.Walk)."""

    pack: Pack
    tools: Registry  # the host's tools by name (runtime.tools.ToolDef)
    input: dict[str, Any]
    state: dict[str, Any]
    step: int
    answers: dict[str, dict[str, Any]]  # human answers by node id, popped when used
    pending_tools: dict[tuple[str, int], list[ToolPayload]]  # journaled tool calls, by (node, step)
    budget_left: int | None

    @property
    def verify(self) -> bool:
        """False only when measuring what verification buys (benchmarks)."""
        ...

    def view(self) -> dict[str, Any]:
        """Committed state plus `input`, read-only by convention."""
        ...

    def ask(
        self,
        node: Node,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        stage: str,
        purpose: str = "answer",
        *,
        logprobs: bool = False,
        given: dict[str, Any] | None = None,
    ) -> tuple[ModelReply, int]:
        """Call the model once; the reply and this call's attempt number. `logprobs`:
        ask the endpoint for per-token log probabilities (ModelReply.logprobs); `given`:
        values the answer already holds, which `schema` leaves out (ModelCall.given)."""
        ...

    def record(
        self,
        node: Node,
        reply: ModelReply,
        attempt: int,
        stage: str,
        ok: bool,
        category: str | None = None,
        reason: str | None = None,
        given: dict[str, Any] | None = None,
    ) -> None:
        """Write one model attempt into the trace; `given`: values the answer was not asked
        for (a quorum's settled fields, runtime.nodes.sure_fields)."""
        ...

    def record_tool(
        self,
        node: Node,
        tool: str,
        args: dict[str, Any],
        result: Any,
        latency_s: float,
        *,
        key: str | None = None,
        replayed: bool = False,
    ) -> None:
        """Journal a tool's result before anything is committed (docs/invariants.md, 4)."""
        ...

    def call_tool(self, node: Node, tool_name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call a host tool through the run's one call path (docs/tools.md): journal
        replay, recording replay, registry lookup, argument schema and check, the call
        (with `idempotency_key=` for side effects), result schema, journal, recording.
        A failed outcome is the node's failure (its on_fail)."""
        ...


class LoadContext(Protocol):
    """What a node kind may use while a pack loads (runtime.pack.load.NodeLoader)."""

    def error(self, message: str, *path: str | int, kind: str = "value") -> None:
        """Report a problem at `path` in graph.yaml (a PackIssue of `kind`)."""
        ...

    def prompt(self, node: Node, *, required: bool) -> Template | None: ...

    def template(self, rel: str, reads: tuple[str, ...] | None, *path: str | int) -> Template | None:
        """Load the prompt template at `rel` (a pack path named at `path`); with `reads`,
        every placeholder must be one of them."""
        ...

    def read(self, rel: str, *, required: bool, why: str) -> str | None:
        """The text of the pack file `rel` (counted in the pack's digest)."""
        ...

    def report(self, issue: PackIssue) -> None:
        """Report a problem in a file other than graph.yaml."""
        ...

    def schema(self, node_id: str, *, required: bool) -> tuple[dict[str, Any] | None, Any]: ...

    def expr(self, source: Any, *path: str | int) -> Expression | None: ...

    def retry(self, spec: Any, *path: str | int) -> RetryPolicy | None: ...

    def field_list(self, value: Any, *path: str | int) -> tuple[str, ...]: ...


class NodeKind(Protocol):
    """One kind of node: its config, its checks, how it runs, how it is drawn.

    Config: `keys` (accepted beyond COMMON_KEYS) and `load`, which fills the node's
    fields and reports what is wrong with them. Checks the whole graph applies by kind:
    `terminal` (the run ends here: no outgoing edges allowed; every other kind needs a
    `to` edge), `can_fail` (an `on_fail` edge out of it is allowed), `waits` (it may
    pause the run for a person: a gold case may stop at it or answer it, and a run that
    visits it is escalated), `asks_model` (its schema goes to a model as a grammar, so
    the endpoint schema lint applies). Drawn and reported by `drawing`."""

    name: str
    keys: frozenset[str]
    drawing: NodeDrawing
    terminal: bool
    can_fail: bool
    waits: bool
    asks_model: bool

    def load(self, node: Node, spec: dict[str, Any], loader: LoadContext) -> None:
        """Fill kind-specific fields of `node` from `spec`, reporting issues to `loader`."""

    def run(self, node: Node, walk: RunContext) -> Outcome:
        """Execute the node against the run's current state. Must not mutate state."""


def may_retry(policy: RetryPolicy, tries: int, walk: RunContext) -> bool:
    """Whether a node that has made `tries` attempts may make one more: within the
    ladder (resamples + feedback), or, with a run-wide `budget`, while the budget lasts
    (taking one from it) and under the node's `max_attempts`."""
    if policy.budget is None:
        return tries < policy.ladder_attempts
    if tries >= policy.max_attempts or not walk.budget_left:
        return False
    walk.budget_left -= 1
    return True


def whole_number(
    spec: dict[str, Any], key: str, default: int, low: int, high: int, loader: LoadContext, at: tuple[str, ...]
) -> int:
    """`spec[key]` (else `default`) when it is a whole number from `low` to `high`; else a
    load error at `at` and `default`."""
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        loader.error(f"{key} must be a whole number from {low} to {high}", *at, key)
        return default
    return value
