"""Case selection (runtime.evaluate.select_cases and `packforge eval --tags/--untagged/
--exclude-tags`): held-out cases, tagged or not, can be run alone."""

from __future__ import annotations

import json
from pathlib import Path

from runtime import load_pack
from runtime.evaluate import select_cases
from tests.support.runtime_packs import ENUM_SCHEMA, pf, write_pack

CASES = [
    {"id": "train-1", "input": {"ticket": "a"}, "expected": {"category": "billing"}, "tags": ["train"]},
    {"id": "train-2", "input": {"ticket": "b"}, "expected": {"category": "billing"}, "tags": ["train", "slow"]},
    {"id": "plain-1", "input": {"ticket": "c"}, "expected": {"category": "billing"}},
    {"id": "slow-1", "input": {"ticket": "d"}, "expected": {"category": "billing"}, "tags": ["slow"]},
]


def pack(tmp_path: Path) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": {"category": "billing"}}},
        cases=CASES,
    )


def ids(root: Path, **how: object) -> list[str]:
    return [c.id for c in select_cases(load_pack(root), **how)]  # type: ignore[arg-type]


def test_selection_by_tags_untagged_and_exclusion(tmp_path: Path) -> None:
    root = pack(tmp_path)
    assert ids(root) == ["train-1", "train-2", "plain-1", "slow-1"]
    assert ids(root, tags={"slow"}) == ["train-2", "slow-1"]
    assert ids(root, untagged=True) == ["plain-1"]
    assert ids(root, tags={"slow"}, untagged=True) == ["train-2", "plain-1", "slow-1"]
    assert ids(root, exclude_tags={"train"}) == ["plain-1", "slow-1"]  # the held-out half, tagged or not
    assert ids(root, tags={"slow"}, exclude_tags={"train"}) == ["slow-1"]


def test_the_cli_runs_the_selected_cases_only(tmp_path: Path) -> None:
    root = pack(tmp_path)
    done = pf("eval", str(root), "--exclude-tags", "train", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(c["id"] for c in json.loads(done.stdout)["cases"]) == ["plain-1", "slow-1"]
    done = pf("eval", str(root), "--untagged", "--json")
    assert [c["id"] for c in json.loads(done.stdout)["cases"]] == ["plain-1"]
    nothing = pf("eval", str(root), "--tags", "train", "--exclude-tags", "train")
    assert nothing.returncode == 2 and "no evalset case is selected" in nothing.stderr


def test_the_cli_warns_when_its_concurrency_is_above_the_endpoints(tmp_path: Path) -> None:
    root = pack(tmp_path)
    # No server listens there: the warning comes before any call; the eval then fails its cases.
    model = "openai:http://127.0.0.1:9/v1#m;concurrency=2;attempts=1;deadline=0.5"
    done = pf("eval", str(root), "--model", model, "--concurrency", "8", "--untagged")
    assert "warning: --concurrency 8 is above the endpoint's concurrency=2" in done.stderr
    assert "Lower --concurrency to 2" in done.stderr
