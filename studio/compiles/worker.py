"""Running one compile, in a worker: claim it, materialise its spec, run the compiler's
loop (`compiler.loop.build`) in the compile's work dir, and write what the loop reports
to the database as it goes. How a compile stays correct when workers die or stall
(docs/compiler.md, "Compiling in the studio"):

- **Claim.** A delivery (studio.work.delivery, the template every leased row runs
  through) claims the compile with one conditional UPDATE (studio.work.leases):
  a queued compile, or a running one whose lease lapsed or that a sweep re-sent. A
  delivery that claims nothing returns at once. A compile claimed more than
  PACKFORGE_COMPILE_MAX_CLAIMS times is closed as failed, with the reason.
- **Resume.** The loop keeps every attempt in the compile's work dir
  (`attempts/<n>/`, `attempt.json` written last), which outlives the worker; `build`
  on a work dir resumes after the last finished attempt. So a delivery that takes a
  killed worker's compile over continues from there: no finished attempt is planned,
  emitted or evaluated again.
- **Progress.** The loop's `on_progress` writes the stage, attempt, planner tokens and
  scores to the row, and copies each newly finished attempt (its attempt.json, plan,
  pack files and eval summaries) into a CompileAttempt row; every write is guarded by
  the lease token, so a delivery that lost the compile writes nothing.
- **Cancel.** The process's watcher (recovery.py) sets the loop's cancel Event when an
  author asks to cancel, or when the lease moved to another delivery: the loop stops,
  and its in-flight planner call is dropped.
- **Cache.** Every target-model call the loop makes goes through the project's cache
  (`cache_dir`, beside the work dirs): a resumed delivery, or a later compile of the
  project, asks the target nothing it has answered before.
- **Judged pack.** With a target, the loop judges the best plan on it and stages the
  pack that won in `work/chosen/` (compiler.judge): its manifest's model is the target,
  never the offline test model the attempts' packs run on. The files, the arm that won
  and the verdict's sentence are written to the row in the same UPDATE as the final
  status, under the lease (`judged`), so any web process can show and adopt them.
- **Cap.** A planner endpoint's calls each hold a slot of that endpoint's global cap
  (studio.work.slots), the one evals and try-it runs share.
- **Scorers.** A spec output compared `scorer:NAME` is compared by the studio's scorer
  registry (PACKFORGE_SCORERS) in every pack the loop loads (studio.compiles.scorers)."""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.utils import timezone

from compiler import Spec, SpecInvalid, load_spec
from compiler.judge import CHOSEN_DIR, VERDICT_FILE
from compiler.loop import Progress, build
from compiler.planners.base import Planner, PlanRequest, PlanResult, make_planner
from runtime import PackforgeError
from studio import packs
from studio.compiles.models import Compile, CompileAttempt
from studio.compiles.recovery import watcher
from studio.compiles.scorers import spec_scorers
from studio.compiles.search import read_object
from studio.compiles.settings import setting
from studio.compiles.shared import S, cache_dir, work_dir
from studio.endpoints.backends import spec_for
from studio.projects.specs import spec_files
from studio.projects.storage import PackRepo, StorageError
from studio.redaction import stored
from studio.work import leases
from studio.work.delivery import Delivery
from studio.work.leases import LeaseLost
from studio.work.slots import Slots, holding, slots
from studio.work.watcher import Held, LeaseWatcher

log = logging.getLogger("packforge.studio.compiles")

PACK_BYTES_KEPT = 4 * 1024 * 1024  # an attempt's pack files kept in its row, all together
FAILING_CASES_KEPT = 50  # failing cases kept in an attempt's eval summary


class CappedPlanner:
    """A planner whose every plan() holds a slot of its endpoint's global cap while in
    flight, so compiles, evals and try-it runs together never send one endpoint more
    calls at once than its `concurrency`. Waiting for a slot stops when `cancel` is set."""

    def __init__(self, inner: Planner, slots: Slots, key: str, limit: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.slots, self.key, self.limit = slots, key, limit

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        with holding(self.slots, self.key, self.limit, cancel):
            return self.inner.plan(request, cancel)


def open_planner(c: Compile) -> Planner:
    """The compile's planner: the model-free one, or its endpoint's (the key is read by
    this process from the variable the endpoint names; never from the spec)."""
    endpoint = c.planner_endpoint
    if endpoint is None:
        return make_planner("rules")
    return CappedPlanner(make_planner(spec_for(endpoint)), slots(), f"endpoint-{endpoint.pk}", endpoint.concurrency)


# -- materialising the spec -----------------------------------------------------------------


def materialise_spec(files: dict[str, bytes], folder: Path) -> Spec:
    """Write the spec's files into `folder` (emptied first) and load them; SpecInvalid
    when they do not load."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    packs.materialize(files, folder)
    return load_spec(folder)


# -- one compile ------------------------------------------------------------------------------


def _close(pk: int, token: str, status: str, raw: dict[str, Any] | None = None, **fields: Any) -> bool:
    """Close the compile with `status` and `fields` (redacted: `stored`) and `raw` (pack
    files, written as they are, like an attempt's), if this delivery holds the lease."""
    values = {**stored(fields), **(raw or {})}
    return leases.close(Compile, pk, token, status=status, finished_at=timezone.now(), **values)


class CompileDelivery(Delivery[Compile]):
    """One delivery of one compile (studio.work.delivery); see the module's docstring."""

    model = Compile
    noun = "compile"
    max_claims_setting = "PACKFORGE_COMPILE_MAX_CLAIMS"
    failed = S.FAILED
    stamps_start = True

    def load(self) -> Compile:
        return Compile.objects.select_related("project", "planner_endpoint", "target_endpoint").get(pk=self.pk)

    def watcher(self) -> LeaseWatcher:
        return watcher()

    def max_claims(self) -> int:
        return int(setting("PACKFORGE_COMPILE_MAX_CLAIMS"))

    def before(self, row: Compile) -> tuple[bool, str | None]:
        if not row.cancel_requested:
            return False, None
        closed = _close(self.pk, self.token, S.CANCELLED, stage="cancelled", message="cancelled")
        return True, (S.CANCELLED if closed else None)

    def end(self, row: Compile, status: str, error: str) -> bool:
        return _close(self.pk, self.token, status, error=error)

    def refusal(self, exc: Exception) -> str | None:
        if isinstance(exc, SpecInvalid):
            return f"the spec does not load: {'; '.join(str(i) for i in exc.issues[:10])}"
        if isinstance(exc, SoftTimeLimitExceeded):
            limit_s = setting("PACKFORGE_COMPILE_SOFT_TIME_LIMIT_S")
            return f"ran longer than PACKFORGE_COMPILE_SOFT_TIME_LIMIT_S={limit_s} s; its finished attempts are kept"
        if isinstance(exc, packs.PackUnrunnable | StorageError | PackforgeError):
            return str(exc)
        return None

    def run(self, row: Compile, held: Held) -> str | None:
        return _run_claimed(row, self.token, held.cancel, lambda: held.lost)


def run_compile(pk: int) -> str | None:
    """Run a compile to its end; return the final status written, or None when this
    delivery had nothing to do (the compile is final, or another delivery holds it, or
    took it over while this one ran). Safe to deliver any number of times."""
    return CompileDelivery(pk).deliver()


def _run_claimed(c: Compile, token: str, cancel: threading.Event, lost: Callable[[], bool]) -> str | None:
    work = work_dir(c.pk)
    work.mkdir(parents=True, exist_ok=True)
    spec = materialise_spec(spec_files(PackRepo(c.project.repo_path), c.version), work / "spec")
    planner = open_planner(c)
    target = spec_for(c.target_endpoint) if c.target_endpoint is not None else None
    tools = packs.host_tools() if spec.tools else None
    scorers = spec_scorers(spec)  # the host's functions for outputs compared `scorer:NAME` (None: none is)

    def on_progress(p: Progress) -> None:
        fields = {
            "attempt": p.attempt or 0,
            "stage": p.stage,
            "message": (p.message or "")[:2000],
            "tokens": p.tokens or 0,
            "offline_score": p.offline_score,
            "target_score": p.target_score,
        }
        if not Compile.objects.filter(pk=c.pk, lease_owner=token, status=S.RUNNING).update(**stored(fields)):
            cancel.set()  # taken over, or closed: stop the loop; nothing more is written
            return
        record_attempts(c.pk, token, work)

    result = build(
        spec,
        planner,
        work,
        target=target,
        tools=tools,
        scorers=scorers,
        attempts=c.max_attempts,
        cancel=cancel,
        on_progress=on_progress,
        cache=cache_dir(c.project),  # the project's target calls, kept across compiles and workers
    )
    if lost():
        raise LeaseLost(c.pk)
    record_attempts(c.pk, token, work)
    cancelled = cancel.is_set() and Compile.objects.filter(pk=c.pk, cancel_requested=True).exists()
    status = S.CANCELLED if cancelled else S.DONE
    fields: dict[str, Any] = {"best_attempt": result.best, "full_marks": bool(result.full_marks)}
    raw: dict[str, Any] = {}
    if cancelled:
        fields.update(stage="cancelled", message="cancelled by an author")
    else:
        fields.update(stage="done")  # the loop's last message says which attempt is best and why it stopped
        found = judged(work)
        raw["judged_pack_files"] = found.pop("judged_pack_files", None)
        fields.update(found)
    if not _close(c.pk, token, status, raw, **fields):
        raise LeaseLost(c.pk)
    return status


# -- the judged pack: from the work dir into the row ----------------------------------------------

MODEL_CHARS = 500  # the judged pack's model, as the row keeps it
SENTENCE_CHARS = 2000  # the verdict's sentence, as the row keeps it


def judged(work: Path) -> dict[str, Any]:
    """What judging on the target left in `work` (compiler.judge), as the row's fields:
    the verdict's sentence, and, when the verdict says it staged the pack that won
    (`"pack": "chosen"`) and `chosen/manifest.yaml` is there, that pack's files (bounded
    like an attempt's: read_pack), the arm that won and the manifest's model. {} when the
    loop wrote no verdict (it had no attempt with a pack)."""
    verdict, _ = read_object(work / VERDICT_FILE)
    if verdict is None:
        return {}
    sentence = str(verdict.get("sentence") or "")[:SENTENCE_CHARS]
    out: dict[str, Any] = {"judged_pack_files": None, "judged_arm": "", "judged_model": "", "judged_sentence": sentence}
    staged = work / CHOSEN_DIR
    if verdict.get("pack") != CHOSEN_DIR or not (staged / "manifest.yaml").is_file():
        return out
    files, problem = read_pack(staged)
    out["judged_arm"] = str(verdict.get("chosen") or "")[:16]
    out["judged_model"] = manifest_model(staged / "manifest.yaml")
    if files is None:
        out["judged_sentence"] = f"{sentence} (the judged pack was not kept: {problem or 'it could not be read'})"
    out["judged_pack_files"] = files
    return out


def manifest_model(path: Path) -> str:
    """The `model:` of the pack manifest at `path` ("" when it has none or cannot be read)."""
    try:
        with path.open("rb") as f:
            doc = yaml.safe_load(f.read(PACK_BYTES_KEPT))
    except (OSError, yaml.YAMLError):
        return ""
    model = doc.get("model") if isinstance(doc, dict) else None
    return str(model)[:MODEL_CHARS] if model is not None else ""


# -- attempts: from the work dir into rows --------------------------------------------------------


def finished_attempts(work: Path) -> dict[int, Path]:
    """The attempt folders of `work` that hold attempt.json (written last: finished)."""
    out: dict[int, Path] = {}
    folder = work / "attempts"
    if not folder.is_dir():
        return out
    for child in folder.iterdir():
        if child.name.isdigit() and (child / "attempt.json").is_file():
            out[int(child.name)] = child
    return dict(sorted(out.items()))


def record_attempts(compile_pk: int, token: str, work: Path) -> list[int]:
    """Copy each finished attempt not yet in the database into a CompileAttempt row, while
    this delivery holds the lease (the check and the inserts are one transaction that
    holds the compile's row lock). Returns the numbers written."""
    have = set(CompileAttempt.objects.filter(compile_id=compile_pk).values_list("number", flat=True))
    new = {n: folder for n, folder in finished_attempts(work).items() if n not in have}
    if not new:
        return []
    rows = [attempt_row(compile_pk, n, folder) for n, folder in new.items()]
    with transaction.atomic():
        if not Compile.objects.filter(pk=compile_pk, lease_owner=token, status=S.RUNNING).update(lease_owner=token):
            raise LeaseLost(compile_pk)
        for row in rows:
            CompileAttempt.objects.get_or_create(compile_id=compile_pk, number=row.number, defaults=_fields_of(row))
    return sorted(new)


def _fields_of(row: CompileAttempt) -> dict[str, Any]:
    return {
        f.name: getattr(row, f.name)
        for f in CompileAttempt._meta.concrete_fields
        if f.name not in ("id", "compile", "number")
    }


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def attempt_row(compile_pk: int, number: int, folder: Path) -> CompileAttempt:
    """An unsaved CompileAttempt for the finished attempt in `folder`."""
    record = _json(folder / "attempt.json") or {}
    evals = {}
    for name in ("offline", "target"):
        report = _json(folder / f"{name}.json")
        if isinstance(report, dict):
            evals[name] = eval_summary(report)
    files, problem = read_pack(folder / "pack")
    problems = [str(p) for p in record.get("problems") or []]
    if problem:
        problems.append(problem)
    return CompileAttempt(
        compile_id=compile_pk,
        number=number,
        status=str(record.get("status") or "error"),
        offline_score=_number(record.get("offline_score")),
        target_score=_number(record.get("target_score")),
        tokens=int(record.get("tokens") or 0),
        cost_usd=float(record.get("cost_usd") or record.get("cost") or 0.0),
        seconds=float(record.get("seconds") or 0.0),
        failing_nodes=[str(n) for n in record.get("failing_nodes") or []],
        problems=stored(problems),
        plan=_json(folder / "plan.json"),
        pack_files=files,
        evals=stored(evals),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_pack(folder: Path) -> tuple[dict[str, str] | None, str | None]:
    """The pack's files under `folder`, path -> text; None (and why) when there is no
    pack, a file is not text, or they are too large to keep."""
    if not folder.is_dir():
        return None, None
    files: dict[str, str] = {}
    size = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        data = path.read_bytes()
        size += len(data)
        if size > PACK_BYTES_KEPT:
            return None, f"the pack is larger than {PACK_BYTES_KEPT} bytes; not kept"
        try:
            files[path.relative_to(folder).as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            return None, f"{path.relative_to(folder).as_posix()} is not UTF-8 text; the pack was not kept"
    return files, None


def eval_summary(report: dict[str, Any]) -> dict[str, Any]:
    """What the attempt page shows of an eval report (runtime EvalReport.to_dict): the
    counts, the blame per node, the coverage, and the failing cases (bounded)."""
    cases = [c for c in report.get("cases") or [] if isinstance(c, dict)]
    failing = [
        {
            "id": c.get("id"),
            "status": c.get("status"),
            "blamed": c.get("blamed"),
            "path": c.get("path") or [],
            "diffs": (c.get("diffs") or [])[:5],
            "problems": (c.get("problems") or [])[:3],
        }
        for c in cases
        if not c.get("passed")
    ]
    coverage = report.get("coverage") or {}
    total = int(report.get("total") or len(cases))
    passed = int(report.get("passed") or sum(1 for c in cases if c.get("passed")))
    blame = report.get("failures_by_node") or {}
    failures = sum(blame.values()) or 1
    return {
        "model": report.get("model"),
        "passed": passed,
        "total": total,
        "score": passed / total if total else 0.0,
        "blame": [{"node": node, "failures": n, "share": n / failures} for node, n in blame.items()],
        "coverage": {
            "taken": coverage.get("taken"),
            "total": coverage.get("total"),
            "untaken": (coverage.get("untaken") or [])[:50],
        },
        "failing": failing[:FAILING_CASES_KEPT],
        "failing_total": len(failing),
    }
