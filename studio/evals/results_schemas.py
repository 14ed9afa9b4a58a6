"""The shapes of the eval results API (results_api.py): blame, coverage, tiers, tags, the
case table and one case's trace, compare, the matrix, and adding an evalset case."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema


class ReasonOut(Schema):
    category: str
    reason: str
    count: int


class NodeBlameOut(Schema):
    node: str
    kind: str
    in_pack: bool
    failures: int
    share: float
    attempts: int
    rejections: int
    rejection_rate: float | None
    categories: dict[str, int]
    reasons: list[ReasonOut]
    tokens: int
    latency_s: float
    cost_usd: float
    tool_calls: int


class BlameOut(Schema):
    eval: int
    failures: int
    unblamed: int
    nodes: list[NodeBlameOut]


class EdgeOut(Schema):
    index: int
    source: str
    target: str
    kind: str
    name: str
    cases: int
    share: float


class UnreachedOut(Schema):
    case_id: str
    repeat: int
    problems: list[str]


class CoverageOut(Schema):
    eval: int
    runs: int
    taken: int
    total: int
    edges: list[EdgeOut]
    untaken: list[EdgeOut]
    unreached: list[UnreachedOut]
    unreached_count: int
    unknown_edges: list[int]


class TierOut(Schema):
    tier: str
    count: int
    share: float | None
    passed: int
    accuracy: float | None
    cost_total: float
    cost_per_case: float | None


class TiersOut(Schema):
    eval: int
    total: int
    auto_accuracy: float | None
    tiers: list[TierOut]


class TagOut(Schema):
    tag: str
    cases: int
    runs: int
    passed: int
    pass_rate: float | None


class CaseRowOut(Schema):
    case_id: str
    repeat: int
    status: str
    tier: str
    blamed: str
    end_node: str
    tags: list[str]
    input: dict[str, Any] | None
    expected: dict[str, Any] | None
    output: dict[str, Any] | None
    error: str
    generations: int
    tokens: int
    latency_s: float
    cost_usd: float


class CasePageOut(Schema):
    eval: int
    filters: dict[str, str]
    count: int
    page: int
    pages: int
    per_page: int
    cases: list[CaseRowOut]


class CaseTraceOut(CaseRowOut):
    eval: int
    diffs: list[dict[str, Any]]
    problems: list[Any]
    trace: dict[str, Any] | None
    rejected_text_shown: bool


class SideOut(Schema):
    status: str
    tier: str
    blamed: str
    output: dict[str, Any] | None


class PairOut(Schema):
    case_id: str
    repeat: int
    input: dict[str, Any] | None
    expected: dict[str, Any] | None  # b's, else a's
    expected_a: dict[str, Any] | None  # as a's version of the evalset has it
    expected_b: dict[str, Any] | None  # as b's has it
    evalset_changed: bool  # the case's input or expected differs between the two, or one lacks it
    a: SideOut | None
    b: SideOut | None
    changed: bool
    same_output: bool


class MetricDeltaOut(Schema):
    metric: str
    a: float
    b: float
    delta: float
    better: bool | None


class CompareOut(Schema):
    a: int
    b: int
    complete: bool
    paired_by: str
    pairs: int
    skipped: int
    fixed: int
    broken: int
    p_value: float
    metrics: list[MetricDeltaOut]
    cases: list[PairOut]


class ColumnOut(Schema):
    eval: int
    version: str
    model_spec: str
    status: str
    scored: int
    passed: int
    pass_rate: float | None
    missing: int


class MatrixRowOut(Schema):
    case_id: str
    input: dict[str, Any] | None
    expected: dict[str, Any] | None  # the newest evalset's that has the case
    expected_by_eval: list[dict[str, Any] | None]  # each eval's own, in the evals' order
    evalset_changed: bool  # the case differs between the evals' evalsets
    cells: list[SideOut | None]
    differs: bool


class MatrixOut(Schema):
    evals: list[ColumnOut]
    differ: int
    rows: list[MatrixRowOut]


class EvalsetCaseIn(Schema):
    project: str
    input: dict[str, Any]
    expected: dict[str, Any]
    id: str = ""
    tags: list[str] = Field(default_factory=list)
    note: str = ""
    message: str = ""
    from_eval: int | None = None  # where it came from, for its note: an eval's run...
    from_case: str = ""
    from_repeat: int = 0
    from_run: int | None = None  # ...or a try-it run


class EvalsetCaseOut(Schema):
    project: str
    case_id: str
    commit: str
