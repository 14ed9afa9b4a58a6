"""SIGKILL a real `packforge run` in the window between a side effect and its journal
write, again and again, and resume each run: every run completes, the side effect is
re-executed (at least once, docs/tools.md#idempotency), and always with the same
idempotency key, so a tool that deduplicates on its key has no effective duplicate."""

from __future__ import annotations

from pathlib import Path

from tests.support.tool_kill import KillBench, duplicates, write_kill_pack

KILLS = 4


def test_it_re_executes_a_killed_side_effect_with_the_same_key(tmp_path: Path) -> None:
    pack, tools = write_kill_pack(tmp_path / "kill")
    logs = tmp_path / "logs"
    logs.mkdir()
    bench = KillBench(pack, tools, tmp_path / "runs.sqlite", logs)
    for i in range(KILLS):
        run_id = f"kill-{i}"
        assert bench.kill_in_the_window(run_id), f"{run_id} never reached the window"
        assert bench.status(run_id) == "running"  # killed: nothing after the side effect was journaled
        resumed = bench.finish(run_id)
        assert resumed.returncode == 0, resumed.stderr
        assert bench.status(run_id) == "done"
    attempts, effects = bench.keys("attempts.log"), bench.keys("effects.log")
    charges = [k for k in attempts if ":charge:" in k]
    assert sorted(charges) == sorted([f"kill-{i}:charge:1" for i in range(KILLS)] * 2)  # each re-executed once
    assert duplicates(attempts) == KILLS  # what a tool that ignores the key does
    assert duplicates(effects) == 0  # a tool that deduplicates on the key: no effective duplicate
    assert sorted(effects) == sorted(f"kill-{i}:{node}:1" for i in range(KILLS) for node in ("charge", "notify"))
