"""A stand-in for the compiler's loop (compiler.loop.build), for the compile tests.

`StandIn` is the one seam these tests fake: `compiler.loop.build`'s contract (the work
dir's `attempts/<n>/{plan.json,pack/,offline.json,attempt.json}`, attempt.json written
last; resume after the last finished attempt; Progress reports; the cancel Event),
scripted per attempt, so the studio side (rows, pages, API, lease, cancel, resume) is
tested on its own. The real loop runs in the integration tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings

from studio.projects.views import example_files

SPECS = Path(django_settings.BASE_DIR) / "specs"


def spec_files(name: str = "support_triage") -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((SPECS / name).iterdir()) if p.is_file()}


@dataclass
class Progress:
    attempt: int
    stage: str
    message: str = ""
    tokens: int = 0
    offline_score: float | None = None
    target_score: float | None = None


@dataclass
class BuildResult:
    best: int | None
    full_marks: bool
    attempts: list[dict[str, Any]]
    out: Path | None = None


@dataclass
class Scripted:
    """One attempt of the stand-in: its offline score, what it blames, its pack's files
    (None: the plan did not emit), and a hook run once it has finished."""

    score: float
    failing: tuple[str, ...] = ()
    pack: dict[str, bytes] | None = None
    status: str = "ok"
    after: Callable[[], None] | None = None


def triage_pack(**changed: bytes) -> dict[str, bytes]:
    files = example_files("support_triage")
    files.update(changed)
    return files


def offline_report(score: float, failing: tuple[str, ...]) -> dict[str, Any]:
    total = 15
    passed = round(score * total)
    cases = [{"id": f"st-{i:02d}", "passed": i < passed, "status": "done", "blamed": None} for i in range(total)]
    for i, case in enumerate(cases[passed:]):
        case.update(
            blamed=failing[i % len(failing)] if failing else None,
            path=["classify", failing[0] if failing else "route"],
            diffs=[{"field": "priority", "expected": "p1", "actual": "p3", "missing": False}],
        )
    blame: dict[str, int] = {}
    for case in cases:
        if not case["passed"] and case["blamed"]:
            blame[case["blamed"]] = blame.get(case["blamed"], 0) + 1
    return {
        "model": "fake:fakes/offline.json",
        "passed": passed,
        "total": total,
        "failures_by_node": blame,
        "coverage": {"taken": 5, "total": 6, "untaken": ["prioritise -> review (on_fail)"]},
        "cases": cases,
    }


@dataclass
class StandIn:
    """compiler.loop.build, scripted. `planned` lists the attempts it planned (across
    calls: a resumed call plans only the attempts after the last finished one)."""

    script: list[Scripted]
    planned: list[int] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, spec: Any, planner: Any, work: Path, **options: Any) -> BuildResult:
        self.calls.append({"spec": spec, "planner": planner, "work": work, **options})
        cancel: threading.Event | None = options.get("cancel")
        on_progress = options.get("on_progress") or (lambda p: None)
        limit = options.get("attempts") or len(self.script)
        root = work / "attempts"
        done = sorted(int(p.name) for p in root.glob("*") if (p / "attempt.json").exists()) if root.exists() else []
        tokens = 0
        for number in range(1, min(limit, len(self.script)) + 1):
            if number in done:
                continue
            if cancel is not None and cancel.is_set():
                on_progress(Progress(number, "cancelled", "cancelled", tokens))
                break
            step = self.script[number - 1]
            self.planned.append(number)
            tokens += 100
            on_progress(Progress(number, "plan", f"attempt {number}: planning", tokens))
            folder = root / str(number)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "plan.json").write_text(json.dumps({"name": "support_triage", "attempt": number}))
            if step.pack is not None:
                for path, data in step.pack.items():
                    (folder / "pack" / path).parent.mkdir(parents=True, exist_ok=True)
                    (folder / "pack" / path).write_bytes(data)
                (folder / "offline.json").write_text(json.dumps(offline_report(step.score, step.failing)))
            on_progress(Progress(number, "offline_eval", f"attempt {number}: offline eval", tokens, step.score))
            record = {
                "number": number,
                "status": step.status,
                "offline_score": step.score if step.pack is not None else None,
                "target_score": None,
                "tokens": 100,
                "cost_usd": 0.01,
                "seconds": 0.5,
                "failing_nodes": list(step.failing),
                "problems": [] if step.pack is not None else ["nodes[1].writes: 'x' is not a spec output"],
            }
            (folder / "attempt.json").write_text(json.dumps(record))
            on_progress(Progress(number, "offline_eval", f"attempt {number} finished", tokens, step.score))
            if step.after is not None:
                step.after()
        finished = sorted(int(p.name) for p in root.glob("*") if (p / "attempt.json").exists())
        scores = {n: self.script[n - 1].score for n in finished if self.script[n - 1].pack is not None}
        best = max(scores, key=lambda n: (scores[n], -n)) if scores else None
        stage = "cancelled" if cancel is not None and cancel.is_set() else "done"
        on_progress(Progress(finished[-1] if finished else 0, stage, stage, tokens))
        return BuildResult(best, best is not None and scores[best] == 1.0, [])


@dataclass
class FakePlanner:
    name: str


CLASSIFY_PROMPT = (
    (SPECS.parent / "packs" / "support_triage" / "prompts" / "classify.txt")
    .read_bytes()
    .replace(b"Pick the ONE category", b"Pick exactly ONE category")
)
TWO_ATTEMPTS = [
    Scripted(0.6, ("prioritise",), triage_pack()),
    Scripted(1.0, (), triage_pack(**{"prompts/classify.txt": CLASSIFY_PROMPT})),
]
