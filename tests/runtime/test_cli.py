"""The `packforge` CLI as a user runs it: a real subprocess, exit codes, one-line errors."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.support.runtime_packs import pf, write_pack

REPO = Path(__file__).resolve().parents[2]


def test_it_validates_a_pack(triage: Path) -> None:
    out = pf("validate", str(triage))
    assert out.returncode == 0
    assert out.stdout.strip() == "t v1: 4 nodes, 3 edges, 1 evalset cases, entry 'classify'"


def test_it_lists_every_problem_and_exits_2(triage: Path) -> None:
    (triage / "manifest.yaml").write_text("name: t\nversion: 1\nentry: classify\nmodle: x\n")
    (triage / "grammars" / "classify.json").write_text("{")
    out = pf("validate", str(triage))
    assert out.returncode == 2
    assert "pack is invalid (2 problems)" in out.stderr
    assert "manifest.yaml:4: unknown key 'modle'; did you mean 'model'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_it_runs_a_pack_and_prints_the_output(triage: Path) -> None:
    out = pf("run", str(triage), "--input", '{"ticket": "charged twice"}')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"category": "billing", "priority": "p1"}


def test_it_reads_input_from_a_file_and_writes_a_trace(tmp_path: Path, triage: Path) -> None:
    (tmp_path / "in.json").write_text('{"ticket": "x"}')
    out = pf("run", str(triage), "--input", f"@{tmp_path / 'in.json'}", "--trace", str(tmp_path / "t.json"))
    assert out.returncode == 0
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["path"] == ["classify", "priority", "done"] and trace["tier"] == "auto"


def test_it_gives_one_line_errors_for_bad_input(triage: Path) -> None:
    cases = [
        (["run", str(triage), "--input", "{bad"], "--input is not valid JSON"),
        (["run", str(triage), "--input", "[1]"], "--input must be a JSON object"),
        (["run", str(triage), "--input", "{}", "--model", "nope"], "needs a scheme"),
        (["run", str(triage), "--input", "{}", "--model", "fake:missing.json"], "scripted model file not found"),
        (["run", str(triage), "--resume", "x"], "--resume needs --db"),
        (["run", str(triage), "--input", "{}", "--tools", "nomodule_xyz:reg"], "cannot import nomodule_xyz"),
        (["eval", "/no/such/pack"], "not a pack directory"),
        (["frobnicate"], "invalid choice"),
    ]
    for args, message in cases:
        out = pf(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) <= 2 and "Traceback" not in out.stderr


def test_it_exits_1_when_a_run_fails(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={"a": {"kind": "generate", "reads": [], "writes": ["n"]}, "done": {"kind": "end"}},
        edges=[{"from": "a", "to": "done"}],
        grammars={"a": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
        script={"nodes": {"a": {"n": "many"}}},
    )
    out = pf("run", str(root), "--input", "{}")
    assert out.returncode == 1
    assert "failed: a: schema: n must be of type integer" in out.stderr


def test_it_waits_at_a_human_node_then_resumes_with_an_answer(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": [], "writes": ["category"]},
            "review": {"kind": "human", "reads": ["category"], "writes": ["approved"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "review"}, {"from": "review", "to": "done"}],
        grammars={
            "review": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}
        },
        prompts={"review": "Approve a {{ category }} refund?"},
        script={"nodes": {"classify": {"category": "billing"}}},
    )
    db = str(tmp_path / "runs.sqlite")
    out = pf("run", str(root), "--input", "{}", "--db", db, "--run-id", "h1")
    assert out.returncode == 3
    assert "question: Approve a billing refund?" in out.stderr
    assert "waiting at human node 'review'" in out.stderr
    bad = pf("run", str(root), "--db", db, "--resume", "h1", "--answer", '{"approved": "yes"}')
    assert bad.returncode == 2 and "approved must be of type boolean" in bad.stderr
    done = pf("run", str(root), "--db", db, "--resume", "h1", "--answer", '{"approved": true}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"approved": True, "category": "billing"}


def test_it_prints_the_graph_as_mermaid(triage: Path) -> None:
    out = pf("graph", str(triage))
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "flowchart TD"
    assert """  classify -->|"category == 'billing'"| priority""" in lines


TOOLS = """
import os, signal
from pathlib import Path
LOG = Path(os.environ["TOOL_LOG"])
def send(to):
    with LOG.open("a") as f:
        f.write("send\\n")
    return {"sent": True}
def crash():
    if os.environ.get("CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"ok": True}
registry = {"send": send, "crash": crash}
"""


def test_it_resumes_after_sigkill_without_repeating_a_tool_call(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["send", "crash"]},
        nodes={
            "draft": {"kind": "generate", "reads": ["input.to"], "writes": ["body"]},
            "send": {
                "kind": "tool",
                "tool": "send",
                "reads": ["input.to"],
                "args": {"to": "input.to"},
                "writes": ["sent"],
            },
            "crash": {"kind": "tool", "tool": "crash", "writes": ["ok"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "draft", "to": "send"}, {"from": "send", "to": "crash"}, {"from": "crash", "to": "done"}],
        script={"nodes": {"draft": {"body": "hi"}}},
    )
    (tmp_path / "tools.py").write_text(TOOLS)
    log, db = tmp_path / "calls.log", str(tmp_path / "runs.sqlite")
    args = ["run", str(root), "--tools", f"{tmp_path / 'tools.py'}:registry", "--db", db]
    killed = pf(*args, "--input", '{"to": "a@b.c"}', "--run-id", "k1", env={"TOOL_LOG": str(log), "CRASH": "1"})
    assert killed.returncode == -signal.SIGKILL
    assert log.read_text() == "send\n"
    resumed = pf(*args, "--resume", "k1", "--trace", str(tmp_path / "t.json"), env={"TOOL_LOG": str(log)})
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"body": "hi", "ok": True, "sent": True}
    assert log.read_text() == "send\n"
    trace = json.loads((tmp_path / "t.json").read_text())
    assert [s["replayed"] for s in trace["steps"]] == [True, True, False, False]


def test_it_refuses_a_pack_whose_tools_are_not_registered(tmp_path: Path) -> None:
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["send"]},
        nodes={"send": {"kind": "tool", "tool": "send", "writes": ["sent"]}, "done": {"kind": "end"}},
        edges=[{"from": "send", "to": "done"}],
        script={"nodes": {}},
    )
    out = pf("run", str(root), "--input", "{}")
    assert out.returncode == 2
    assert "tool 'send' is not registered by the host (registered: none)" in out.stderr
