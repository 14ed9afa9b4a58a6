"""`packforge validate --endpoint` against a real llama-server with SmolLM2-135M-Instruct
(-c 4096 -np 2: 2048 tokens a slot): every evalset case's request is counted by the
server's own template and tokenizer (runtime.context_fit), and a case over the context
is reported with the `truncate:` rule to write, before an eval spends calls on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.fault_server import FaultServer
from tests.support.model_servers import RunningServer
from tests.support.runtime_packs import pf
from tests.support.smollm2_packs import ENDS, ONE_NODE_EDGES, department_node, smol_spec, write_pack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SHORT = {"id": "short", "input": {"message": "My parcel is late."}, "expected": {"department": "shipping"}}
LONG_MESSAGE = "My parcel is late again. " * 700  # about 4,200 tokens
LONG = {"id": "long", "input": {"message": LONG_MESSAGE}, "expected": {"department": "shipping"}}


def pack_with(
    root: Path, cases: list[dict[str, object]], examples: list[dict[str, object]] | None = None, max_tokens: int = 32
) -> Path:
    node = department_node(examples={"file": "examples.jsonl", "count": 3, "strategy": "fixed"}, max_tokens=max_tokens)
    write_pack(root, {"department": node, **ENDS}, ONE_NODE_EDGES, system="system.txt")
    if examples is not None:
        (root / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    (root / "evalset.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


def warnings_of(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("warning:")]


def test_a_case_over_the_context_names_the_rule_and_the_rule_makes_it_fit(
    tmp_path: Path, smollm2_server: RunningServer
) -> None:
    pack = pack_with(tmp_path / "p", [SHORT, LONG])
    spec = smol_spec(smollm2_server, "grammar=gbnf")
    done = pf("validate", str(pack), "--endpoint", spec)
    assert done.returncode == 0, done.stderr
    [warning] = warnings_of(done.stdout)
    assert warning.startswith("warning: evalset.jsonl:2: case 'long', node 'department': the request is ")
    assert "over the context of 2048 even without few-shot examples" in warning
    assert f"input.message is {len(LONG_MESSAGE)} characters and manifest.yaml has no truncate:" in warning
    # The rule it suggests is one that fits: written into the manifest, the check passes.
    suggested = re.search(r"max_chars: (\d+)", warning)
    assert suggested is not None
    manifest = yaml.safe_load((pack / "manifest.yaml").read_text())
    manifest["truncate"] = {"message": {"max_chars": int(suggested.group(1)), "keep": "head"}}
    (pack / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    again = pf("validate", str(pack), "--endpoint", spec)
    assert warnings_of(again.stdout) == []
    assert "context: every evalset case fits (2 requests counted by the server, 2048 tokens a slot)" in again.stdout


def test_a_case_that_fits_once_its_examples_are_dropped_says_so(tmp_path: Path, smollm2_server: RunningServer) -> None:
    wordy = [
        {
            "id": f"ex-{i}",
            "input": {"message": f"Refund number {i} is missing. " * 90},
            "expected": {"department": "billing"},
        }
        for i in range(3)
    ]
    middle = {"id": "middle", "input": {"message": "My parcel is late. " * 200}, "expected": {"department": "shipping"}}
    done = pf("validate", str(pack_with(tmp_path / "p", [middle], wordy)), "--endpoint", smol_spec(smollm2_server))
    [warning] = warnings_of(done.stdout)
    assert "case 'middle', node 'department': the request is " in warning
    assert "over the context of 2048; without its few-shot examples it is " in warning
    assert warning.endswith("so the run drops examples (the farthest first) to fit")


def test_a_request_that_leaves_too_little_room_for_the_answer_is_reported(
    tmp_path: Path, smollm2_server: RunningServer
) -> None:
    done = pf(
        "validate", str(pack_with(tmp_path / "p", [SHORT], max_tokens=2000)), "--endpoint", smol_spec(smollm2_server)
    )
    [warning] = warnings_of(done.stdout)
    assert "case 'short', node 'department': the request is " in warning
    assert "of the context of 2048 for an answer of up to 2000 (max_tokens); the answer may be cut short" in warning


def test_a_server_that_cannot_count_tokens_is_reported_as_not_checked(tmp_path: Path, fault: FaultServer) -> None:
    done = pf("validate", str(pack_with(tmp_path / "p", [SHORT, LONG])), "--endpoint", fault.spec())
    assert done.returncode == 0, done.stderr
    assert warnings_of(done.stdout) == []
    assert "note: context not checked: the endpoint answers neither llama-server's /props" in done.stdout
