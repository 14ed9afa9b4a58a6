"""The runtime's public API is what `runtime/__init__.py` exports (httpx's
tests/test_exported_members.py is the model): the studio and the compiler import these
names from `runtime` and nothing else. Changing the list is a decision: change it here too."""

from __future__ import annotations

import types

import runtime

PINNED = [
    "cli_main",  # `packforge`: compiler.cli hands every command but build/check to it
    "NODE_KINDS",
    "NODE_SHAPES",
    "NodeDrawing",
    "NodeKind",
    "drawing_for",
    "Attempt",
    "Backend",
    "BACKEND_KINDS",
    "BackendConfig",
    "BackendError",
    "BackendKind",
    "BadSpec",
    "baseline_document",
    "calibrate",
    "Calibration",
    "Cancelled",
    "Case",
    "CaseProblem",
    "CaseResult",
    "check_baseline",
    "check_endpoint",
    "CheckpointStore",
    "CheckResult",
    "ContextOverflow",
    "DEFAULT_TOLERANCES",
    "Edge",
    "EdgeTaken",
    "Entry",
    "EvalReport",
    "evaluate",
    "ExprError",
    "FakeConfig",
    "FencedOut",
    "FieldDiff",
    "gate_minimums",
    "gold_tools",
    "HostFailed",
    "load_pack",
    "load_scorers",
    "load_tools",
    "mcnemar_exact",
    "select_cases",
    "enum_problems",
    "Scorer",
    "ScorerFailed",
    "measure_prior",
    "MemoryStore",
    "METRIC_DIRECTIONS",
    "ModelCall",
    "ModelReply",
    "NoSpareSlot",
    "Node",
    "open_backend",
    "pack_file",
    "redact_data",
    "path_problem",
    "shown_path",
    "MAX_PATH_DEPTH",
    "OpenAIConfig",
    "OutputRejected",
    "Pack",
    "PACK_ISSUE_KINDS",
    "PackforgeError",
    "PackInvalid",
    "PackIssue",
    "paired_outcomes",
    "parse_backend_spec",
    "PATH_PROBLEM_KINDS",
    "percentile",
    "PROBLEM_KINDS",
    "resume_run",
    "run_pack",
    "RunNotFound",
    "RunOptions",
    "RunRecord",
    "RunResult",
    "RunStatus",  # done | failed | waiting | cancelled | running, as a StrEnum (issue 21)
    "RunStateError",
    "SCHEMA_CATEGORIES",
    "score_case",
    "SimConfig",
    "SQLiteStore",
    "Step",
    "TokenLogprob",
    "Tool",
    "ToolCall",
    "Trace",
    "TraceBuilder",  # the journal decoded into a Trace one entry at a time (Trace.from_journal for a whole one): the studio's live run traces
    "TRACE_VERSION",
    "TIER_WORDS",
    "wilson_interval",
    # per-field comparison and scoring (issue 10)
    "COMPARES",
    "FieldRule",
    "values_match",
    "rule_for",
    "compare_key",
    "baseline_summary",
    "case_score",
    "field_matches",
    "field_table",
    "observed_values",
    "set_f1",
    # what the compiler's spec loader shares with the pack loader (issue 11)
    "compile_expr",
    "Expression",
    "load_yaml",
    "nearest_key",
    "parse_evalset",
    "SourceMap",
    # model tiers and a person's answers (issue 12)
    "Tier",
    "PERSON",
    "check_answer",
    "node_schema",
    # packs as MCP tools (issue 14): what the studio's MCP endpoint shares with `packforge mcp`
    "McpEntry",
    "McpTool",
    "ToolAnswer",
    "mcp_answer_http",
    "pack_tool",
    "run_payload",
    # the host tool registry and its one call path (issue 14)
    "Registry",
    "ToolDef",
    "ToolOutcome",
    "ToolOutcomeKind",  # ToolOutcome.kind's words, as a StrEnum (issue 21)
    "PatternRefused",  # RE2 refuses a pattern (runtime.regex; issue 22)
    "compile_pattern",
    "check_schema",  # the metaschema and every pattern by RE2 (runtime.schemas)
    "schema_validator",  # the one JSON Schema validator: patterns matched by RE2
    "ToolTape",  # recorded tool results (runtime.recordings): evaluate(tape=), the studio's evals
    "RunTape",  # one run's hook on a ToolTape (RunOptions.tape), with its counts
    "StepPacer",  # a host's cap on a run's steps per second (RunOptions.pacer; issue 22)
    "tool",
    "tool_def",
    "tool_metrics",
    "similarity",  # two inputs' word-set Jaccard, as `strategy: nearest` ranks (the verdict's nearest arm)
]


def test_it_exports_exactly_the_pinned_names() -> None:
    assert sorted(runtime.__all__) == sorted(PINNED)
    assert len(set(runtime.__all__)) == len(runtime.__all__)


def test_it_exports_every_public_name_it_imports() -> None:
    public = [name for name, value in vars(runtime).items() if not name.startswith("_")]
    assert sorted(runtime.__all__) == sorted(n for n in public if not isinstance(vars(runtime)[n], types.ModuleType))


def test_it_resolves_every_exported_name() -> None:
    assert [name for name in runtime.__all__ if not hasattr(runtime, name)] == []
