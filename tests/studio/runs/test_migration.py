"""Try-it runs stored before 0003 (a list of steps) are converted to the runtime's trace
dict, and read back as the same steps."""

from __future__ import annotations

import importlib

from runtime import Trace
from studio.runs import steps

OLD_STEPS = [
    {
        "step": 1,
        "node": "classify",
        "kind": "generate",
        "status": "ok",
        "writes": {"category": "billing"},
        "attempt": 2,
        "reason": "",
        "edge": {"kind": "next", "target": "lookup"},
        "prompt": "Classify: ...",
        "attempts": [
            {
                "attempt": 1,
                "stage": "sample",
                "ok": False,
                "category": "parse",
                "reason": "not JSON",
                "text": "eh",
                "prompt_tokens": 10,
                "completion_tokens": 3,
                "reasoning_tokens": 0,
                "latency_s": 0.5,
                "ttft_s": None,
                "cost_usd": 0.0,
            },
            {
                "attempt": 2,
                "stage": "resample",
                "ok": True,
                "category": None,
                "reason": None,
                "text": '{"category": "billing"}',
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "reasoning_tokens": 0,
                "latency_s": 0.25,
                "ttft_s": None,
                "cost_usd": 0.0,
            },
        ],
        "tool_calls": [],
        "prompt_tokens": 20,
        "completion_tokens": 8,
        "latency_s": 0.75,
        "cost_usd": 0.0,
    },
    {
        "step": 2,
        "node": "lookup",
        "kind": "tool",
        "status": "ok",
        "writes": {"order": {"id": 1}},
        "attempt": 0,
        "reason": "",
        "edge": None,
        "prompt": "",
        "attempts": [],
        "tool_calls": [{"tool": "lookup_order", "args": {"id": 1}, "result": {"id": 1}, "latency_s": 0.01}],
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0,
        "cost_usd": 0,
    },
]


def test_it_reads_a_converted_run_as_the_same_steps() -> None:
    migration = importlib.import_module("studio.runs.migrations.0003_trace")
    trace = migration.trace_of(OLD_STEPS, "try-7", "done", "")
    assert trace["status"] == "done" and [a["node"] for a in trace["attempts"]] == ["classify", "classify"]
    assert steps.trace_steps(trace) == OLD_STEPS
    assert Trace.from_dict(trace).path == ["classify", "lookup"]  # the runtime reads it as its own
