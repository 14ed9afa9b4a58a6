"""`packforge eval` for long evals, as a user runs it (a real subprocess): exit codes that
separate a failed baseline gate from failed cases, the progress line on stderr, repeats,
traces in the --json report."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.support.runtime_packs import ENUM_SCHEMA, REPO, pf, write_pack


def triage_pack(tmp_path: Path, *, wrong: bool = False) -> Path:
    """Two cases; with `wrong`, case `b`'s model answers are rejected (one kept retry
    text: "refunds" is not in the enum) until the node takes on_fail."""
    answers: dict[str, object] = {"a": {"classify": {"category": "billing"}}}
    answers["b"] = {"classify": [{"category": "refunds"}, {"category": "other"}]} if wrong else answers["a"]
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"cases": answers},
        cases=[
            {"id": "a", "input": {"ticket": "refund please"}, "expected": {"category": "billing"}},
            {"id": "b", "input": {"ticket": "charged twice"}, "expected": {"category": "billing"}},
        ],
    )


def test_it_exits_0_when_every_case_passes_and_1_when_some_fail(tmp_path: Path) -> None:
    assert pf("eval", str(triage_pack(tmp_path / "good"))).returncode == 0
    failing = pf("eval", str(triage_pack(tmp_path / "bad", wrong=True)))
    assert failing.returncode == 1, failing.stderr
    assert "1/2 cases passed" in failing.stdout


def test_it_exits_0_when_the_baseline_gate_holds_though_cases_fail(tmp_path: Path) -> None:
    root = triage_pack(tmp_path, wrong=True)
    baseline = tmp_path / "baseline.json"
    assert pf("eval", str(root), "--write-baseline", str(baseline)).returncode == 1  # no gate yet: cases decide
    gated = pf("eval", str(root), "--baseline", str(baseline))
    assert gated.returncode == 0, gated.stdout
    assert "1/2 cases passed" in gated.stdout and "baseline gate: passed" in gated.stdout


def test_it_exits_4_when_the_baseline_gate_fails(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    assert pf("eval", str(triage_pack(tmp_path / "good")), "--write-baseline", str(baseline)).returncode == 0
    worse = pf("eval", str(triage_pack(tmp_path / "bad", wrong=True)), "--baseline", str(baseline), "--json")
    assert worse.returncode == 4
    assert json.loads(worse.stdout)["gate"]["ok"] is False  # "baseline" is the trivial baseline


def test_it_refuses_bad_long_eval_options_with_exit_2(tmp_path: Path) -> None:
    root = str(triage_pack(tmp_path))
    cases = [
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--traces"], "--traces adds traces to the --json report; add --json"),
        (["--json", "--rejected-text"], "--rejected-text applies to --traces; add --traces"),
        (["--progress", "--no-progress"], "not allowed with argument"),
    ]
    for args, message in cases:
        out = pf("eval", root, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr


def test_it_documents_the_exit_codes_in_the_help(tmp_path: Path) -> None:
    out = pf("eval", "--help")
    assert out.returncode == 0
    assert "4 the baseline gate failed" in out.stdout and "--repeats K" in out.stdout


def test_it_writes_progress_to_stderr_only_when_asked_off_a_terminal(tmp_path: Path) -> None:
    root = str(triage_pack(tmp_path, wrong=True))
    quiet = pf("eval", root, "--json", "--concurrency", "1")
    assert quiet.stderr == ""
    shown = pf("eval", root, "--json", "--progress", "--concurrency", "1")
    assert json.loads(shown.stdout)["total"] == 2  # stdout stays one JSON document
    lines = shown.stderr.splitlines()
    assert [line.split(",")[0] for line in lines] == ["eval: 1/2 runs", "eval: 2/2 runs"]
    assert lines[-1].startswith("eval: 2/2 runs, 1 passed (50.0%), took ")
    assert "ETA " in lines[0] and "\r" not in shown.stderr


def eval_on_a_terminal(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """Run eval with stderr on a pseudo-terminal and stdout in a file: exit status, what
    the terminal showed, what stdout got."""
    primary, secondary = pty.openpty()
    out_path = tmp_path / "stdout.txt"
    with out_path.open("w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime", "eval", *args], cwd=REPO, stdout=stdout, stderr=secondary
        )
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the terminal's other end closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    code = proc.wait(timeout=60)
    return code, shown.decode(), out_path.read_text()


def test_it_redraws_progress_in_place_on_a_terminal(tmp_path: Path) -> None:
    root = str(triage_pack(tmp_path))
    code, shown, stdout = eval_on_a_terminal(tmp_path, root, "--concurrency", "1")
    assert code == 0
    assert shown.startswith("\reval: 1/2 runs, 1 passed (100.0%), ETA ")
    assert "\reval: 2/2 runs, 2 passed (100.0%), took " in shown and shown.endswith("\n")
    assert "\x1b[K" in shown
    assert "2/2 cases passed" in stdout and "\r" not in stdout
    code, shown, _ = eval_on_a_terminal(tmp_path, root, "--no-progress")
    assert code == 0 and shown == ""


def test_it_includes_traces_without_rejected_text_unless_asked(tmp_path: Path) -> None:
    root = str(triage_pack(tmp_path, wrong=True))
    plain = json.loads(pf("eval", root, "--json").stdout)
    assert all("trace" not in c for c in plain["cases"])
    doc = json.loads(pf("eval", root, "--json", "--traces").stdout)
    case_b = next(c for c in doc["cases"] if c["id"] == "b")
    rejected = [a for a in case_b["trace"]["attempts"] if not a["ok"]]
    assert rejected and all(a["text"] == "" and a["category"] == "schema" for a in rejected)
    assert case_b["trace"]["run_id"] == "eval-b" and case_b["trace"]["version"] == 1
    accepted = [a for a in case_b["trace"]["attempts"] if a["ok"]]
    assert [json.loads(a["text"]) for a in accepted] == [{"category": "other"}]
    full = json.loads(pf("eval", root, "--json", "--traces", "--rejected-text").stdout)
    case_b = next(c for c in full["cases"] if c["id"] == "b")
    assert "refunds" in next(a["text"] for a in case_b["trace"]["attempts"] if not a["ok"])


def test_it_repeats_every_case_and_reports_consistency(tmp_path: Path) -> None:
    root = str(triage_pack(tmp_path, wrong=True))
    out = pf("eval", root, "--json", "--traces", "--repeats", "3")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert (doc["passed"], doc["total"], doc["repeats"]) == (3, 6, 3)
    assert sorted(c["trace"]["run_id"] for c in doc["cases"]) == [f"eval-{c}-r{k}" for c in "ab" for k in (1, 2, 3)]
    assert doc["consistency"]["cases"] == {"a": {"runs": 3, "passed": 3}, "b": {"runs": 3, "passed": 0}}
    text = pf("eval", root, "--repeats", "2")
    assert "repeats: 2 runs per case" in text.stdout and "1 cases passed every run, 0 some, 1 none" in text.stdout
