"""The compile loop's records and its work dir (docs/compiler.md, "The loop"): the
progress it reports, each finished attempt's record, and the files an attempt leaves
(`attempts/<n>/`, `best.json`, `spec.json`), read back on a resume."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.planners.shared import Feedback
from compiler.spec import SPEC_FILE, Spec

ATTEMPT_FILE = "attempt.json"
BEST_FILE = "best.json"
SPEC_STAMP = "spec.json"  # which spec (a digest of its files) the work dir compiles
REPORT_CHARS = 4000  # the re-plan report's bound (docs/compiler.md)


@dataclass(frozen=True)
class Progress:
    """One step of a build, for a progress line or a studio poll: the attempt (0 while
    inducing), the stage it is in (one of STAGES), a sentence, the planner tokens spent
    so far (all attempts), and the latest scores."""

    attempt: int
    stage: str
    message: str
    tokens: int = 0
    offline_score: float | None = None
    target_score: float | None = None


@dataclass(frozen=True)
class AttemptRecord:
    """A finished attempt, as `attempts/<n>/attempt.json` holds it. `status` is one of
    STATUSES; scores are pass rates (0..1), None when that eval did not run; `tokens` and
    `cost_usd` are this attempt's planner spend plus (cost only) the target eval's;
    `stages` holds seconds per stage (`plan` is the planner's, model time included)."""

    number: int
    status: str
    offline_score: float | None = None
    target_score: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    failing_nodes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    stages: dict[str, float] = field(default_factory=dict)
    calls_per_case: float | None = None  # mean model calls per case on the deciding eval
    cost_per_case: float | None = None  # mean model dollars per case on the target

    @property
    def full_marks(self) -> bool:
        """Every gold case passed offline, and on the target when one was evaluated."""
        return self.status == "ok" and self.offline_score == 1.0 and self.target_score in (None, 1.0)

    def rank(self) -> tuple[float, float, float, float]:
        """Higher is better: offline score, target score, then cheaper to run."""
        if self.status != "ok":
            return (-1.0, -1.0, 0.0, 0.0)
        return (
            self.offline_score or 0.0,
            self.target_score or 0.0,
            -(self.cost_per_case or 0.0),
            -(self.calls_per_case or 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "status": self.status,
            "offline_score": self.offline_score,
            "target_score": self.target_score,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "seconds": self.seconds,
            "failing_nodes": list(self.failing_nodes),
            "problems": list(self.problems),
            "stages": dict(self.stages),
            "calls_per_case": self.calls_per_case,
            "cost_per_case": self.cost_per_case,
            "full_marks": self.full_marks,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptRecord:
        return cls(
            number=int(data["number"]),
            status=str(data["status"]),
            offline_score=data.get("offline_score"),
            target_score=data.get("target_score"),
            tokens=int(data.get("tokens", 0)),
            cost_usd=float(data.get("cost_usd", 0.0)),
            seconds=float(data.get("seconds", 0.0)),
            failing_nodes=tuple(data.get("failing_nodes", ())),
            problems=tuple(data.get("problems", ())),
            stages={str(k): float(v) for k, v in (data.get("stages") or {}).items()},
            calls_per_case=data.get("calls_per_case"),
            cost_per_case=data.get("cost_per_case"),
        )


def spec_fingerprint(spec: Spec) -> str:
    """A digest of the spec folder's two files, as they were loaded."""
    digest = hashlib.sha256()
    try:
        digest.update((spec.root / SPEC_FILE).read_bytes())
    except OSError:
        digest.update(spec.name.encode())
    digest.update(b"\x00")
    digest.update(spec.gold_bytes)
    return digest.hexdigest()


def finished_attempts(work: Path) -> list[AttemptRecord]:
    """The finished attempts in `work` (those with attempt.json), in order, up to the
    first gap: an attempt after an unfinished one is not trusted."""
    records = []
    n = 1
    while (data := read_json(work / "attempts" / str(n) / ATTEMPT_FILE)) is not None:
        records.append(AttemptRecord.from_dict(data))
        n += 1
    return records


def best_attempt(records: list[AttemptRecord]) -> AttemptRecord | None:
    """The attempt that ranks highest (the earliest among equals); None when none is ok."""
    ok = [r for r in records if r.status == "ok"]
    if not ok:
        return None
    return max(ok, key=lambda r: (r.rank(), -r.number))


def feedback_for(work: Path, records: list[AttemptRecord]) -> Feedback | None:
    """The re-plan feedback about the last finished attempt that is not cancelled, read
    back from its stored files (so a resumed build hands the planner what an
    uninterrupted one would have)."""
    for record in reversed(records):
        if record.status != "cancelled":
            return attempt_feedback(work / "attempts" / str(record.number), record)
    return None


def attempt_feedback(folder: Path, record: AttemptRecord) -> Feedback:
    """Feedback from an attempt's files: its plan, its deciding eval's blame (the target's
    when it ran, else the offline model's) and failing cases, or the problems that kept
    its plan from loading."""
    plan = read_json(folder / "plan.json") or {}
    report = read_json(folder / "target.json") if record.target_score is not None else None
    report = report or read_json(folder / "offline.json")
    score = record.target_score if record.target_score is not None else (record.offline_score or 0.0)
    if record.status != "ok" or report is None:
        text = f"Attempt {record.number}: {record.status}.\n" + "\n".join(record.problems)
        return Feedback(record.number, plan, 0.0, (), text[:REPORT_CHARS], problems=tuple(record.problems))
    return Feedback(record.number, plan, score, record.failing_nodes, blame_report(report, record.number))


def blame_report(report: Mapping[str, Any], attempt: int) -> str:
    """The text a re-plan reads: the score, failures per node (most blamed first), and
    the failing cases (input, expected, got, why), bounded to REPORT_CHARS."""
    lines = [
        f"Attempt {attempt} on {report.get('model')}: {report.get('passed')}/{report.get('total')} gold cases passed.",
        "Failures by node (blamed node: failing cases):",
    ]
    lines += [f"  {node}: {count}" for node, count in (report.get("failures_by_node") or {}).items()]
    untaken = (report.get("coverage") or {}).get("untaken") or []
    if untaken:
        lines.append("Edges no gold case took: " + "; ".join(untaken))
    notes = report.get("offline_notes") or {}
    if notes:
        lines.append("Cases the offline test model cannot express: " + "; ".join(f"{k}: {v}" for k, v in notes.items()))
    lines.append("Failing cases:")
    for case in report.get("cases") or []:
        if case.get("passed"):
            continue
        got = case.get("output") or case.get("committed") or {}
        why = "; ".join(case.get("problems") or []) or ", ".join(
            f"{d['field']}: expected {json.dumps(d['expected'])}, got {json.dumps(d['actual'])}"
            for d in case.get("diffs") or []
        )
        lines.append(
            f"- {case.get('id')} [blamed: {case.get('blamed')}] took {' > '.join(case.get('path') or [])}; "
            f"got {json.dumps(got, ensure_ascii=False)}; why: {why}"
        )
    text = "\n".join(lines)
    return text if len(text) <= REPORT_CHARS else text[: REPORT_CHARS - 20] + "\n... (truncated)"


def swap_in(source: Path, out: Path) -> None:
    """Copy the pack folder `source` to `out`, which holds either the old pack or the new
    one at every moment (a temporary sibling, then renames)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    fresh = out.parent / f".{out.name}.new-{tag}"
    shutil.copytree(source, fresh)
    if out.exists():
        old = out.parent / f".{out.name}.old-{tag}"
        os.rename(out, old)
        os.rename(fresh, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(fresh, out)


def write_json(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename: a reader (or a resume) never
    sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
        return None


__all__ = [
    "ATTEMPT_FILE",
    "BEST_FILE",
    "REPORT_CHARS",
    "SPEC_STAMP",
    "AttemptRecord",
    "Progress",
    "attempt_feedback",
    "best_attempt",
    "blame_report",
    "feedback_for",
    "finished_attempts",
    "read_json",
    "spec_fingerprint",
    "swap_in",
    "write_json",
]
