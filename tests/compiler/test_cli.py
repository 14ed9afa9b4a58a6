"""`python -m compiler check SPEC_DIR`: a one-line summary and exit 0, or every problem
with its file and line on stderr and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compiler.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_it_summarises_a_good_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "specs" / "refund_desk")]) == 0
    out, err = capsys.readouterr()
    assert out == (
        "refund_desk: 1 input, 5 outputs, 2 tools, 4 rules (1 as an expression), unsure end 'review', 18 gold cases\n"
    )
    assert err == ""


def test_it_prints_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "spec.yaml").write_text("name: x\ntask: y\ninputs: {a: {description: A}}\nouputs: {}\n")
    assert main(["check", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "error: spec is invalid (3 problems):",
        "  spec.yaml:4: unknown key 'ouputs'; did you mean 'outputs'? "
        "valid keys: auto_accuracy, budgets, inputs, model, name, outputs, rules, split, task, test, tools, train, "
        "unsure_end, validation",
        "  spec.yaml:1: 'outputs' is required: map each field name to {description: ...}",
        "  gold.jsonl: missing file: every spec has gold cases, one JSON object per line; create it",
    ]


def test_it_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "compiler", "check", "specs/moderation"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.split(":")[0]) == (0, "moderation")


def test_it_exits_2_on_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    # an unknown command goes on to the runtime's CLI, which refuses it in one line
    assert main(["chek", "specs/moderation"]) == 2
    assert "invalid choice: 'chek'" in capsys.readouterr().err
