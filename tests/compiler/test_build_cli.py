"""`packforge build` (and the console script handing everything else to the runtime's
CLI) as a user runs it: the installed `packforge` script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.triage import BROKEN, RIGHT, WORSE, write_spec

ROOT = Path(__file__).resolve().parents[2]
PACKFORGE = Path(sys.executable).parent / "packforge"


def packforge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PACKFORGE), *map(str, args)], cwd=ROOT, capture_output=True, text=True, check=False, timeout=240
    )


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    return write_spec(tmp_path / "spec")


def plans(folder: Path, *docs: dict[str, object]) -> Path:
    folder.mkdir()
    for n, doc in enumerate(docs, 1):
        (folder / f"{n}.json").write_text(json.dumps(doc))
    return folder


def test_it_builds_a_pack_with_full_marks_offline_and_exits_1_as_nothing_was_judged(
    spec_dir: Path, tmp_path: Path
) -> None:
    recorded = plans(tmp_path / "plans", BROKEN, RIGHT)
    done = packforge("build", spec_dir, "-o", tmp_path / "pack", "--planner", f"recorded:{recorded}")
    assert done.returncode == 1, done.stderr  # no target: full marks offline is structure, not a verdict
    assert "attempt 2 of 2" in done.stdout and "full marks" in done.stdout
    assert "nothing was judged on a model" in done.stdout
    for line in ("[attempt 1] plan:", "[attempt 1] offline_eval:", "[attempt 2] emit:", "[attempt 2] done:"):
        assert line in done.stderr
    assert (tmp_path / "pack" / "manifest.yaml").is_file()
    assert (tmp_path / "pack.build" / "attempts" / "2" / "attempt.json").is_file()
    assert packforge("validate", tmp_path / "pack").returncode == 0


def test_it_exits_1_and_still_writes_the_best_pack_when_short(spec_dir: Path, tmp_path: Path) -> None:
    recorded = plans(tmp_path / "plans", WORSE, BROKEN)
    done = packforge(
        "build", spec_dir, "-o", tmp_path / "pack", "--planner", f"recorded:{recorded}", "--attempts", "2", "--json"
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert (result["best"], result["full_marks"], result["stopped"]) == (2, False, "attempts")
    assert [a["offline_score"] for a in result["attempts"]] == [0.5, 0.75]
    assert (tmp_path / "pack" / "graph.yaml").read_bytes() == (
        tmp_path / "pack.build" / "attempts" / "2" / "pack" / "graph.yaml"
    ).read_bytes()


def test_it_resumes_its_work_dir(spec_dir: Path, tmp_path: Path) -> None:
    recorded = plans(tmp_path / "plans", BROKEN, RIGHT)
    work = tmp_path / "work"
    first = packforge(
        "build",
        spec_dir,
        "-o",
        tmp_path / "pack",
        "--planner",
        f"recorded:{recorded}",
        "--attempts",
        "1",
        "--work",
        work,
    )
    assert first.returncode == 1
    again = packforge("build", spec_dir, "-o", tmp_path / "pack", "--planner", f"recorded:{recorded}", "--work", work)
    assert again.returncode == 1, again.stderr  # nothing judged on a model (no target)
    assert "full marks" in again.stdout
    assert "resuming after attempt 1" in again.stderr
    assert "[attempt 1] plan:" not in again.stderr


def test_it_exits_2_on_a_bad_spec(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "spec.yaml").write_text("name: x\n")
    done = packforge("build", tmp_path / "spec", "-o", tmp_path / "pack")
    assert done.returncode == 2
    assert done.stderr.startswith("error: spec is invalid")
    assert not (tmp_path / "pack").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "specs/moderation"], "-o/--out"),
        (["build", "specs/moderation", "-o", "{tmp}/p", "--planner", "magic"], "unknown planner"),
        (["build", "specs/moderation", "-o", "{tmp}/p", "--attempts", "0"], "--attempts"),
        (["build", "specs/refund_desk", "-o", "{tmp}/p"], "--tools"),
    ],
)
def test_it_exits_2_on_bad_usage(args: list[str], message: str, tmp_path: Path) -> None:
    done = packforge(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr


def test_it_hands_every_other_command_to_the_runtime() -> None:
    done = packforge("validate", "packs/moderation")
    assert (done.returncode, done.stdout.split(":")[0]) == (0, "moderation v1.0")
    assert packforge("eval", "packs/nope").returncode == 2


def test_it_lists_every_command_in_its_help() -> None:
    done = packforge("--help")
    assert done.returncode == 0
    for command in ("validate", "run", "eval", "graph", "endpoints", "pull", "build", "check"):
        assert command in done.stdout


def test_it_checks_a_spec() -> None:
    done = packforge("check", "specs/moderation")
    assert (done.returncode, done.stdout.split(":")[0]) == (0, "moderation")
