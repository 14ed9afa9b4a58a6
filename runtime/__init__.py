"""Packforge runtime: load a pack, walk it against a model, verify every answer before
committing it, checkpoint every step, score a pack against its evalset.

Imports no Django, Celery or studio code: a downloaded pack runs with httpx,
jsonschema and PyYAML installed.

This module is the runtime's public API: the studio and the compiler import these
names from `runtime`, nothing from its submodules. tests/runtime/test_exported_members.py
pins the list."""

from runtime.backends import (
    BACKEND_KINDS,
    Backend,
    BackendConfig,
    BackendKind,
    FakeConfig,
    ModelCall,
    ModelReply,
    OpenAIConfig,
    SimConfig,
    TokenLogprob,
    open_backend,
    pack_file,
    parse_backend_spec,
)
from runtime.calibration import Calibration, calibrate, gate_minimums
from runtime.checkpoint import CheckpointStore, Entry, MemoryStore, RunRecord, SQLiteStore
from runtime.cli import main as cli_main
from runtime.endpoints import CheckResult, check_endpoint
from runtime.errors import (
    PACK_ISSUE_KINDS,
    BackendError,
    BadSpec,
    Cancelled,
    ContextOverflow,
    ExprError,
    FencedOut,
    HostFailed,
    NoSpareSlot,
    OutputRejected,
    PackforgeError,
    PackInvalid,
    PackIssue,
    RunNotFound,
    RunStateError,
)
from runtime.evaluate import (
    DEFAULT_TOLERANCES,
    METRIC_DIRECTIONS,
    PATH_PROBLEM_KINDS,
    PROBLEM_KINDS,
    SCHEMA_CATEGORIES,
    CaseProblem,
    CaseResult,
    EvalReport,
    FieldDiff,
    baseline_document,
    check_baseline,
    evaluate,
    gold_tools,
    score_case,
    select_cases,
    tool_metrics,
)
from runtime.expr import Expression, compile_expr
from runtime.fewshot import similarity
from runtime.logs import redact_data
from runtime.mcp_server import McpEntry, ToolAnswer
from runtime.mcp_server import answer_http as mcp_answer_http
from runtime.mcp_tools import McpTool, pack_tool, run_payload
from runtime.nodes import NODE_KINDS, drawing_for
from runtime.nodes.base import NODE_SHAPES, NodeDrawing, NodeKind
from runtime.pacing import StepPacer
from runtime.pack import Pack, load_pack
from runtime.pack.enums import enum_problems
from runtime.pack.evalset import parse_evalset
from runtime.pack.fields import COMPARES, FieldRule, compare_key, rule_for, values_match
from runtime.pack.model import Case, Edge, Node
from runtime.pack.yamlsrc import SourceMap, load_yaml
from runtime.pack.yamlsrc import nearest as nearest_key
from runtime.paths import MAX_DEPTH as MAX_PATH_DEPTH
from runtime.paths import path_problem
from runtime.paths import shown as shown_path
from runtime.prior import measure_prior
from runtime.recordings import RunTape, ToolTape
from runtime.regex import PatternRefused, compile_pattern
from runtime.schemas import check_schema, schema_validator
from runtime.scorers import Scorer, ScorerFailed, load_scorers
from runtime.scoring import baseline_summary, case_score, field_matches, field_table, observed_values, set_f1
from runtime.stats import mcnemar_exact, paired_outcomes, percentile, wilson_interval
from runtime.tiers import PERSON, Tier, check_answer, node_schema
from runtime.tools import Registry, Tool, ToolDef, ToolOutcome, ToolOutcomeKind, load_tools, tool, tool_def
from runtime.trace import TIER_WORDS, TRACE_VERSION, Attempt, EdgeTaken, RunStatus, Step, ToolCall, Trace, TraceBuilder
from runtime.walker import RunOptions, RunResult, resume_run, run_pack

__all__ = [
    "BACKEND_KINDS",
    "COMPARES",
    "DEFAULT_TOLERANCES",
    "MAX_PATH_DEPTH",
    "METRIC_DIRECTIONS",
    "NODE_KINDS",
    "NODE_SHAPES",
    "PACK_ISSUE_KINDS",
    "PATH_PROBLEM_KINDS",
    "PERSON",
    "PROBLEM_KINDS",
    "SCHEMA_CATEGORIES",
    "TIER_WORDS",
    "TRACE_VERSION",
    "Attempt",
    "Backend",
    "BackendConfig",
    "BackendError",
    "BackendKind",
    "BadSpec",
    "Calibration",
    "Cancelled",
    "Case",
    "CaseProblem",
    "CaseResult",
    "CheckResult",
    "CheckpointStore",
    "ContextOverflow",
    "Edge",
    "EdgeTaken",
    "Entry",
    "EvalReport",
    "ExprError",
    "Expression",
    "FakeConfig",
    "FencedOut",
    "FieldDiff",
    "FieldRule",
    "HostFailed",
    "McpEntry",
    "McpTool",
    "MemoryStore",
    "ModelCall",
    "ModelReply",
    "NoSpareSlot",
    "Node",
    "NodeDrawing",
    "NodeKind",
    "OpenAIConfig",
    "OutputRejected",
    "Pack",
    "PackInvalid",
    "PackIssue",
    "PackforgeError",
    "PatternRefused",
    "Registry",
    "RunNotFound",
    "RunOptions",
    "RunRecord",
    "RunResult",
    "RunStateError",
    "RunStatus",
    "RunTape",
    "SQLiteStore",
    "Scorer",
    "ScorerFailed",
    "SimConfig",
    "SourceMap",
    "Step",
    "StepPacer",
    "Tier",
    "TokenLogprob",
    "Tool",
    "ToolAnswer",
    "ToolCall",
    "ToolDef",
    "ToolOutcome",
    "ToolOutcomeKind",
    "ToolTape",
    "Trace",
    "TraceBuilder",
    "baseline_document",
    "baseline_summary",
    "calibrate",
    "case_score",
    "check_answer",
    "check_baseline",
    "check_endpoint",
    "check_schema",
    "cli_main",
    "compare_key",
    "compile_expr",
    "compile_pattern",
    "drawing_for",
    "enum_problems",
    "evaluate",
    "field_matches",
    "field_table",
    "gate_minimums",
    "gold_tools",
    "load_pack",
    "load_scorers",
    "load_tools",
    "load_yaml",
    "mcnemar_exact",
    "mcp_answer_http",
    "measure_prior",
    "nearest_key",
    "node_schema",
    "observed_values",
    "open_backend",
    "pack_file",
    "pack_tool",
    "paired_outcomes",
    "parse_backend_spec",
    "parse_evalset",
    "path_problem",
    "percentile",
    "redact_data",
    "resume_run",
    "rule_for",
    "run_pack",
    "run_payload",
    "schema_validator",
    "score_case",
    "select_cases",
    "set_f1",
    "shown_path",
    "similarity",
    "tool",
    "tool_def",
    "tool_metrics",
    "values_match",
    "wilson_interval",
]
