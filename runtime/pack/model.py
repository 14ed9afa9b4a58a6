"""The loaded, validated form of a pack. Built only by `load_pack`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from runtime.choices import Choice
    from runtime.confidence import ConfidenceGate, LabelPrior
    from runtime.expr import Expression
    from runtime.fewshot import Examples
    from runtime.pack.fields import FieldRule
    from runtime.templates import Template

EDGE_KINDS = ("next", "on_fail", "on_unsure")


@dataclass(frozen=True)
class RetryPolicy:
    """The retry ladder. `resamples` plain re-draws, then `feedback` re-draws that are
    told what was wrong. With `budget` set, a node may instead keep retrying (up to
    `max_attempts`) while the run-wide budget of extra generations lasts."""

    resamples: int = 2
    feedback: int = 1
    budget: int | None = None
    max_attempts: int = 8

    @property
    def ladder_attempts(self) -> int:
        return 1 + self.resamples + self.feedback


@dataclass
class Node:
    id: str
    kind: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # generate / human
    prompt: Template | None = None
    schema: dict[str, Any] | None = None
    validator: Validator | None = None
    check: Expression | None = None  # `assert:` on generate, `expr:` on assert nodes
    two_stage: bool = False
    samples: int = 1
    agree: int = 1
    agree_on: tuple[str, ...] | None = None  # the fields draws must agree on; None: all writes
    draw_all: bool = False  # make every draw even once the vote is decided (runtime.nodes.voting.decided)
    sure: float | None = (
        None  # the first draw's first call settles the quorum alone when its least likely token had p >= sure
    )
    sure_fields: bool = False  # judge `sure` per field; later draws ask for the unsure ones (runtime.nodes.sure_fields)
    max_tokens: int = 256
    temperature: float = 0.0
    retry: RetryPolicy | None = None
    confidence: ConfidenceGate | None = None  # `confidence: {field, min}`
    prior: LabelPrior | None = None  # `prior: {field, values}` (runtime.prior)
    choices: tuple[Choice, ...] = ()  # per-call enums from labels/*.yaml (runtime.choices)
    examples: Examples | None = None  # few-shot examples (runtime.fewshot)
    system: Template | None = None  # the node's system prompt; else the pack's
    continues: str | None = None  # a generate node whose conversation this one's call goes on from
    # tool
    tool: str | None = None
    args: dict[str, str] = field(default_factory=dict)
    # end
    output: tuple[str, ...] | None = None
    # a kind's own parsed keys, for a kind whose config is none of the fields above: the
    # kind's module defines its shape, so adding a kind needs no field here
    config: Any = None
    line: int | None = None


@dataclass(frozen=True)
class Truncation:
    """`truncate: {FIELD: {max_chars: N, keep: head|tail|middle}}` for one input field."""

    max_chars: int
    keep: str = "head"  # head | tail | middle


TRUNCATE_KEEPS = ("head", "tail", "middle")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str = "next"  # one of EDGE_KINDS
    when: Expression | None = None
    index: int = 0  # position in graph.yaml; also the edge's stable id

    @property
    def label(self) -> str:
        if self.kind != "next":
            return self.kind
        return self.when.source if self.when is not None else ""


@dataclass(frozen=True)
class Case:
    id: str
    input: dict[str, Any]
    expected: dict[str, Any]
    path: tuple[str, ...] | None = None
    end: str | None = None
    tags: tuple[str, ...] = ()
    human: dict[str, dict[str, Any]] = field(default_factory=dict)
    line: int = 0
    # The tool calls the gold path makes, by tool name in order (tool precision in the
    # eval report); None: the `tool` nodes on `path` are the gold calls.
    tools: tuple[str, ...] | None = None


@dataclass
class Pack:
    root: Path
    name: str
    version: str
    entry: str
    nodes: dict[str, Node]
    edges: list[Edge]
    cases: list[Case]
    description: str = ""
    model: str | None = None
    tools: tuple[str, ...] = ()
    inputs: tuple[str, ...] | None = None
    output: tuple[str, ...] | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_steps: int = 200
    system: Template | None = None  # the system prompt of every model node without its own
    truncate: dict[str, Truncation] = field(default_factory=dict)  # per input field, for prompts
    digest: str = ""
    fields: dict[str, FieldRule] = field(default_factory=dict)  # how each field is compared; absent: exact
    train_tag: str | None = None  # evalset cases with this tag are the train split (manifest `train_tag`)

    def outgoing(self, node_id: str, kind: str = "next") -> list[Edge]:
        return [e for e in self.edges if e.source == node_id and e.kind == kind]

    def edge_out(self, node_id: str, kind: str) -> Edge | None:
        found = self.outgoing(node_id, kind)
        return found[0] if found else None

    def retry_for(self, node: Node) -> RetryPolicy:
        return node.retry or self.retry
