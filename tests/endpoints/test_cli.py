"""The CLI against the fault-injecting server, as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.model_servers import REPO
from tests.support.packs import write_chain_pack

# Named so that the redactor's name-based rule (…KEY, …TOKEN, …SECRET) does not apply:
# only register_secret, called by the backend on the value it reads, can hide this key.
KEY_ENV = "ACME_LLM_AUTH"


def pf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_it_never_lets_the_key_reach_a_log_an_error_or_a_trace(fault: FaultServer, tmp_path: Path) -> None:
    key = "pf" + uuid.uuid4().hex  # matches none of the redactor's patterns by itself
    env = {KEY_ENV: key}
    spec = fault.spec(f"key_env={KEY_ENV};backoff=0.01")
    pack = str(write_chain_pack(tmp_path / "pack", nodes=2))
    seen: list[str] = []
    for fmt in ("text", "json"):
        trace = tmp_path / f"trace-{fmt}.json"
        # Two retries (each logged with its failure), then answers.
        fault.configure(script=["503", "truncate"], retry_after="0.01")
        ok = pf(
            "run",
            pack,
            "--model",
            spec,
            "--input",
            '{"story": "A cat."}',
            "--log-level",
            "debug",
            "--log-format",
            fmt,
            "--trace",
            str(trace),
            env=env,
        )
        assert ok.returncode == 0, ok.stderr
        assert "backend.retry" in ok.stderr and "backend.request" in ok.stderr
        seen += [ok.stdout, ok.stderr, trace.read_text()]
        # The server rejects the key and quotes it back, in its message and its echo of the header.
        fault.configure(script=[{"status": 401, "message": f"invalid api key {key}", "echo_auth": True}])
        bad = pf(
            "run",
            pack,
            "--model",
            spec,
            "--input",
            '{"story": "A cat."}',
            "--log-level",
            "debug",
            "--log-format",
            fmt,
            "--trace",
            str(trace),
            env=env,
        )
        assert bad.returncode == 1 and "HTTP 401: invalid api key [REDACTED]" in bad.stderr
        seen += [bad.stdout, bad.stderr, trace.read_text()]
        assert all(r.headers["authorization"] == f"Bearer {key}" for r in fault.completions())
    fault.configure(script=[{"status": 401, "message": f"invalid api key {key}", "echo_auth": True}])
    check = pf("endpoints", "check", spec, "--log-level", "debug", env=env)
    check_json = pf("endpoints", "check", spec, "--json", env=env)
    seen += [check.stdout, check.stderr, check_json.stdout, check_json.stderr]
    assert check.returncode == 1 and "[REDACTED]" in check.stdout
    assert not [text for text in seen if key in text]


def test_it_checks_an_endpoint_that_honours_the_schema(fault: FaultServer) -> None:
    proc = pf("endpoints", "check", fault.spec(), "--json")
    result = json.loads(proc.stdout)
    assert proc.returncode == 0 and result["ok"] and result["honoured"] and result["latency_s"] > 0
    assert json.loads(result["answer"]) == {"word": "zqx-amber"}


def test_it_fails_the_check_of_an_endpoint_that_ignores_the_schema(fault: FaultServer) -> None:
    fault.configure(answer='{"answer": "yes"}')
    proc = pf("endpoints", "check", fault.spec())
    assert proc.returncode == 1
    assert "schema     NOT honoured" in proc.stdout and "result     FAIL" in proc.stdout


def test_it_fails_the_check_of_an_endpoint_that_does_not_answer(fault: FaultServer) -> None:
    url = fault.base_url
    fault.stop()
    proc = pf("endpoints", "check", f"openai:{url}#m;backoff=0.01")
    assert proc.returncode == 1 and "answers    no:" in proc.stdout and "ConnectError" in proc.stdout


def test_it_refuses_to_check_a_bad_spec() -> None:
    proc = pf("endpoints", "check", "openai:http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and proc.stderr.startswith("error: openai spec")


@pytest.mark.parametrize("prices, expected", [("", 0.0), (";price_in=1000;price_out=2000", None)])
def test_it_reports_cost_per_case_and_per_node_in_an_eval(
    fault: FaultServer, tmp_path: Path, prices: str, expected: float | None
) -> None:
    pack = write_chain_pack(tmp_path / "pack", nodes=2)
    answer = {"n1_mood": "happy", "n1_stars": 1, "n2_mood": "happy", "n2_stars": 1}
    (pack / "evalset.jsonl").write_text(
        "".join(
            json.dumps({"id": f"c{i}", "input": {"story": f"Story {i}."}, "expected": answer}) + "\n" for i in range(3)
        )
    )
    proc = pf("eval", str(pack), "--model", fault.spec() + prices, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    per_case = [c["totals"]["cost_usd"] for c in report["cases"]]
    assert len(fault.completions()) == 6
    if expected is not None:
        assert per_case == [0.0, 0.0, 0.0]
    else:
        assert all(cost > 0 for cost in per_case)
        assert report["metrics"]["cost_per_case"] == pytest.approx(sum(per_case) / 3)
        assert set(report["per_node"]) >= {"n1", "n2"}
        assert all(report["per_node"][n]["cost_usd"] > 0 for n in ("n1", "n2"))
