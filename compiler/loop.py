"""The compile loop: induce once, then per attempt plan -> check -> emit -> load ->
evaluate on the offline test model -> (optionally) evaluate on the target model, and
re-plan with the blame report until the pack scores full marks or a budget is spent
(docs/compiler.md, "The loop").

Durability. Everything an attempt makes lives under `work/attempts/<n>/`, and its
`attempt.json` is written last: an attempt with one is finished, an attempt without one
was interrupted (a killed worker) and is redone from scratch. `build` on an existing
work dir resumes after the last finished attempt, with the budgets those attempts spent
already counted and the re-plan feedback rebuilt from their stored files.

The best pack. `out` only ever receives a pack that ranks above the one `work/best.json`
records (offline score, then target score, then cheaper to run): a worse attempt never
overwrites a better pack. The copy goes to a temporary sibling folder first and is
swapped in by rename, so `out` is at every moment either the previous best pack or the
new one, never a half-written mix."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import runtime
from compiler.emit import emit
from compiler.errors import CompilerError, PlanInvalid
from compiler.induce import Induction, induce
from compiler.judge import JudgeInputs, Verdict, judge, validation_score
from compiler.offline import offline_script
from compiler.plan import Plan, parse_plan
from compiler.planners.shared import Planner, PlannerFailed, PlanRequest
from compiler.scorers import check_scorers
from compiler.search import Trial
from compiler.spec import Spec
from compiler.splits import split_gold, without_test
from compiler.tools import ToolSpec, catalogue
from compiler.workdir import (
    ATTEMPT_FILE,
    BEST_FILE,
    SPEC_STAMP,
    AttemptRecord,
    Progress,
    best_attempt,
    feedback_for,
    finished_attempts,
    read_json,
    spec_fingerprint,
    swap_in,
    write_json,
)
from runtime import Cancelled, PackforgeError, PackInvalid, Scorer, Tool, load_pack, open_backend

STAGES = ("induce", "plan", "emit", "load", "offline_eval", "target_eval", "search", "done", "cancelled")
STATUSES = ("ok", "plan_invalid", "pack_invalid", "repeated_plan", "cancelled", "error")
OFFLINE_SCRIPT = "offline.json"  # the offline test model, as the emitted pack's fakes/offline.json
OFFLINE_MODEL = f"fake:fakes/{OFFLINE_SCRIPT}"


@dataclass(frozen=True)
class BuildResult:
    """What a build did: the best attempt's number (None when no attempt produced a
    pack that loads), whether it scores full marks, every attempt in order (resumed ones
    included), the pack folder written (None without `out`, or with no best attempt),
    and why the loop stopped: full_marks, attempts, planner_tokens, cost_usd, cancelled."""

    best: int | None
    full_marks: bool
    attempts: list[AttemptRecord]
    out: Path | None
    stopped: str = "full_marks"
    verdict: Verdict | None = None


def build(
    spec: Spec,
    planner: Planner,
    work: Path,
    *,
    out: Path | None = None,
    target: str | None = None,
    tools: Mapping[str, Tool] | None = None,
    attempts: int | None = None,
    cancel: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    cache: Path | None = None,
    budget: int | None = None,
    concurrency: int = 4,
    scorers: Mapping[str, Scorer] | None = None,
) -> BuildResult:
    """Compile `spec` with `planner` in the work dir `work` (created, or resumed after its
    last finished attempt). Stops at full marks, when `attempts` (default: the spec's
    budget), the spec's planner-token or dollar budget is spent, when the planner answers
    a plan it answered before, or when `cancel` is set. With `out`, the best attempt's
    pack is copied there whenever it beats the pack `work/best.json` records.

    Then the judging (compiler.judge): with a `target`, the best plan and the one-call
    plan are searched on the validation split of the target (every call cached under
    `cache`, default `work/cache`; at most `budget` target calls, default the spec's
    `budgets.target_calls`), measured on the test split, and the winner is written to
    `out`; `BuildResult.verdict` says what won and the exit code. Without a target the
    verdict says nothing was judged on a model. `scorers`: the host's scorer registry, bound
    to every pack the build loads, so an output declared `compare: scorer:NAME` is compared
    by that function wherever two of its values are (compiler.scorers). Raises
    CompilerError when the spec names a tool `tools` lacks, or a scorer `scorers` lacks."""
    check_scorers(spec, scorers)
    return _Build(
        spec,
        planner,
        Path(work),
        out,
        target,
        tools,
        attempts,
        cancel,
        on_progress,
        cache,
        budget,
        concurrency,
        scorers,
    ).run()


class _Build:
    def __init__(
        self,
        spec: Spec,
        planner: Planner,
        work: Path,
        out: Path | None,
        target: str | None,
        tools: Mapping[str, Tool] | None,
        attempts: int | None,
        cancel: threading.Event | None,
        on_progress: Callable[[Progress], None] | None,
        cache: Path | None = None,
        budget: int | None = None,
        concurrency: int = 4,
        scorers: Mapping[str, Scorer] | None = None,
    ) -> None:
        self.scorers = scorers
        self.cache = cache
        self.budget = budget
        self.concurrency = concurrency
        self.repeated = False
        self.attempt_calls = 0  # target calls the attempts' validation scores made in this run
        self.spec = spec
        self.learn = spec  # what the planner and the offline check see (run: no test case when judged)
        self.planner = planner
        self.work = work
        self.out = out
        self.target = target
        self.tools = tools
        self.max_attempts = attempts if attempts is not None else spec.budgets.attempts
        self.cancel = cancel
        self.on_progress = on_progress
        self.records: list[AttemptRecord] = []
        self.catalogue: dict[str, ToolSpec] = catalogue(tools, spec.tools)
        self.induction: Induction | None = None
        self.last_scores: tuple[float | None, float | None] = (None, None)

    # -- bookkeeping -----------------------------------------------------------------

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.records)

    @property
    def cost(self) -> float:
        return sum(r.cost_usd for r in self.records)

    def progress(self, attempt: int, stage: str, message: str) -> None:
        if self.on_progress is not None:
            offline, target = self.last_scores
            self.on_progress(Progress(attempt, stage, message, self.tokens, offline, target))

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def attempt_dir(self, n: int) -> Path:
        return self.work / "attempts" / str(n)

    # -- the loop --------------------------------------------------------------------

    def run(self) -> BuildResult:
        self.work.mkdir(parents=True, exist_ok=True)
        self.claim_work_dir()
        self.records = finished_attempts(self.work)
        if self.records:
            last = self.records[-1]
            self.last_scores = (last.offline_score, last.target_score)
            self.progress(last.number, "induce", f"resuming after attempt {last.number}")
        # judged on a target, the planner and the offline check never see a test case
        self.learn = without_test(self.spec, split_gold(self.spec)) if self.target else self.spec
        self.progress(0, "induce", f"inducing schemas from {len(self.learn.gold)} gold cases")
        self.induction = induce(
            [(c.input, c.expected) for c in self.learn.gold],
            list(self.learn.outputs),
            declared=self.learn.declared_values(),
        )
        stopped = self.stop_reason()
        while stopped is None:
            record = self.attempt(len(self.records) + 1)
            self.records.append(record)
            self.promote(record)
            stopped = "cancelled" if record.status == "cancelled" else self.stop_reason()
        best = best_attempt(self.records)
        full = best is not None and best.full_marks
        verdict: Verdict | None = None
        if stopped != "cancelled" and best is not None and not self.cancelled():
            verdict = self.judge(best)
            if verdict.document.get("cancelled"):
                stopped = "cancelled"
        written = self.out if self.out is not None and best is not None and self.out.is_dir() else None
        if stopped == "cancelled":
            self.progress(len(self.records), "cancelled", "cancelled")
        else:
            offline = (
                "no attempt produced a pack"
                if best is None
                else ("full marks offline" if best.offline_score == 1.0 else "not full marks offline")
            )
            shown = f"attempt {best.number}" if best is not None else "none"
            said = f"; {verdict.sentence}" if verdict is not None else ""
            self.progress(len(self.records), "done", f"best: {shown} ({offline}); stopped: {stopped}{said}")
        return BuildResult(best.number if best else None, full, list(self.records), written, stopped, verdict)

    def judge_inputs(self, plan: Plan, on_trial: Callable[[Trial], None] | None = None) -> JudgeInputs:
        assert self.induction is not None
        return JudgeInputs(
            self.spec,
            plan,
            self.induction,
            self.catalogue,
            self.work,
            self.target,
            self.tools,
            self.cache,
            self.budget,
            self.concurrency,
            self.cancel,
            on_trial,
            planner=self.planner,
            planner_tokens=self.tokens,
            planner_cost=self.cost,
            scorers=self.scorers,
        )

    def judge(self, best: AttemptRecord) -> Verdict:
        """Search and judge the best attempt's plan on the target (compiler.judge)."""
        assert self.induction is not None
        plan = parse_plan(read_json(self.attempt_dir(best.number) / "plan.json"), self.spec)
        n = len(self.records)

        def on_trial(t: Trial) -> None:
            self.progress(
                n,
                "search",
                f"trial {t.trial} ({t.arm} {t.coordinate}): {t.passed}/{t.cases} on validation, {t.calls_total} target calls",
            )

        inputs = self.judge_inputs(plan, on_trial)
        self.progress(n, "search", "judging on the target" if self.target else "no target: nothing judged on a model")
        inputs.attempt_calls = self.attempt_calls
        return judge(inputs, self.out, swap_in)

    def claim_work_dir(self) -> None:
        """Record which spec this work dir compiles, or refuse one made for another
        version of it: resuming its attempts would hand back a pack built for other gold."""
        path = self.work / SPEC_STAMP
        stamp = spec_fingerprint(self.spec)
        found = read_json(path)
        if found is None:
            write_json(path, {"name": self.spec.name, "fingerprint": stamp})
        elif found.get("fingerprint") != stamp:
            raise CompilerError(
                f"the work dir {self.work} holds attempts for another version of spec '{found.get('name')}'; "
                "delete it or pass another work dir"
            )

    def stop_reason(self) -> str | None:
        if any(r.full_marks for r in self.records):
            return "full_marks"
        if self.repeated:
            return "repeated_plan"
        if self.records and self.records[-1].status == "cancelled":
            return "cancelled"
        if self.cancelled():
            return "cancelled"
        if len(self.records) >= self.max_attempts:
            return "attempts"
        if self.tokens >= self.spec.budgets.planner_tokens:
            return "planner_tokens"
        if self.cost > 0 and self.cost >= self.spec.budgets.cost_usd:  # a $0 budget allows free planners
            return "cost_usd"
        return None

    def attempt(self, n: int) -> AttemptRecord:
        folder = self.attempt_dir(n)
        if folder.exists():
            shutil.rmtree(folder)  # an interrupted attempt: redone from scratch
        folder.mkdir(parents=True)
        run = _Attempt(n)
        try:
            record = self.stages(n, folder, run)
        except _Stop as stop:
            record = run.record(stop.status, stop.problems)
        except (CompilerError, PackforgeError, OSError) as exc:
            record = run.record("error", (f"{type(exc).__name__}: {exc}",))
        write_json(folder / ATTEMPT_FILE, record.to_dict())
        self.last_scores = (record.offline_score, record.target_score)
        return record

    def stages(self, n: int, folder: Path, run: _Attempt) -> AttemptRecord:
        self.check_cancel(run)
        self.progress(n, "plan", f"attempt {n}: planning with {self.planner.name}")
        assert self.induction is not None
        request = PlanRequest(self.learn, self.induction, self.catalogue, n, feedback_for(self.work, self.records))
        with run.timed("plan"):
            try:
                result = self.planner.plan(request, self.cancel)
            except Cancelled as exc:
                raise _Stop("cancelled", (str(exc),)) from None
            except PlannerFailed as exc:
                run.tokens += exc.tokens
                run.cost += exc.cost_usd
                raise _Stop("plan_invalid", (str(exc).splitlines()[0], *exc.problems)) from None
        run.tokens += result.tokens
        run.cost += result.cost_usd
        if any(read_json(self.attempt_dir(r.number) / "plan.json") == result.document for r in self.records):
            self.repeated = True  # a deterministic planner answered a plan it answered before: stop, spend nothing
            raise _Stop("repeated_plan", ("the planner answered the same plan as an earlier attempt",))
        write_json(folder / "plan.json", result.document)
        try:
            plan = parse_plan(result.document, self.spec)
        except PlanInvalid as exc:
            raise _Stop("plan_invalid", tuple(exc.problems)) from None
        self.check_cancel(run)
        self.progress(n, "emit", f"attempt {n}: emitting {len(plan.nodes)} nodes")
        with run.timed("emit"):
            script = offline_script(plan, self.learn, self.catalogue)
            pack_dir = emit(
                plan,
                self.learn,
                folder / "pack",
                induction=self.induction,
                catalogue=self.catalogue,
                fakes={OFFLINE_SCRIPT: script},
            )
        self.progress(n, "load", f"attempt {n}: loading the pack")
        with run.timed("load"):
            try:
                pack = load_pack(
                    pack_dir, tools=set(self.tools) if self.tools is not None else None, scorers=self.scorers
                )
            except PackInvalid as exc:
                raise _Stop("pack_invalid", tuple(str(i) for i in exc.issues)) from None
        self.check_cancel(run)
        self.progress(n, "offline_eval", f"attempt {n}: {len(pack.cases)} cases on the offline test model")
        with run.timed("offline_eval"):
            backend = open_backend(OFFLINE_MODEL, base_dir=pack_dir, default=OFFLINE_MODEL)
            try:
                report = runtime.evaluate(pack, backend, tools=self.tools)
            finally:
                backend.close()
        offline = report.to_dict()
        offline["offline_notes"] = script.get("notes", {})
        write_json(folder / "offline.json", offline)
        run.offline = report.passed / max(report.total, 1)
        run.failing = tuple(k for k in report.failures_by_node() if k != "(none)")
        run.calls = report.metrics()["mean_model_calls"]
        self.last_scores = (run.offline, None)
        self.progress(n, "offline_eval", f"attempt {n}: offline {report.passed}/{report.total}")
        if self.target is not None and run.offline == 1.0 and self.induction is not None:
            self.check_cancel(run)
            self.progress(n, "target_eval", f"attempt {n}: the validation split on {self.target}")
            with run.timed("target_eval"):
                run.target, calls = validation_score(self.judge_inputs(plan), f"attempt-{n}")
                self.attempt_calls += calls
            self.last_scores = (run.offline, run.target)
            self.progress(n, "target_eval", f"attempt {n}: validation {run.target:.2f} on the target ({calls} calls)")
        return run.record("ok", ())

    def check_cancel(self, run: _Attempt) -> None:
        if self.cancelled():
            raise _Stop("cancelled", ("cancelled",))

    # -- the best pack ---------------------------------------------------------------

    def promote(self, record: AttemptRecord) -> None:
        """Copy the attempt's pack to `out` when it ranks above the recorded best."""
        if self.out is None or record.status != "ok" or self.target is not None:
            return  # with a target, `out` only ever receives the judged pack (its model is the target)
        best_file = self.work / BEST_FILE
        current = read_json(best_file)
        if (
            current is not None
            and current.get("out") == str(self.out.resolve())
            and self.out.is_dir()
            and tuple(current.get("rank", ())) >= record.rank()
        ):
            return
        swap_in(self.attempt_dir(record.number) / "pack", self.out)
        write_json(
            best_file,
            {"attempt": record.number, "rank": list(record.rank()), "out": str(self.out.resolve()), **record.to_dict()},
        )


class _Stop(Exception):
    """An attempt ends early with `status` (plan_invalid, pack_invalid, cancelled)."""

    def __init__(self, status: str, problems: tuple[str, ...]) -> None:
        super().__init__(status)
        self.status = status
        self.problems = problems


class _Attempt:
    """What one attempt has measured so far."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.started = time.perf_counter()
        self.tokens = 0
        self.cost = 0.0
        self.offline: float | None = None
        self.target: float | None = None
        self.failing: tuple[str, ...] = ()
        self.calls: float | None = None
        self.cost_per_case: float | None = None
        self.stages: dict[str, float] = {}

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.stages[stage] = self.stages.get(stage, 0.0) + time.perf_counter() - started

    def record(self, status: str, problems: tuple[str, ...]) -> AttemptRecord:
        return AttemptRecord(
            number=self.number,
            status=status,
            offline_score=self.offline,
            target_score=self.target,
            tokens=self.tokens,
            cost_usd=self.cost,
            seconds=time.perf_counter() - self.started,
            failing_nodes=self.failing,
            problems=problems,
            stages=dict(self.stages),
            calls_per_case=self.calls,
            cost_per_case=self.cost_per_case,
        )


__all__ = [
    "STAGES",
    "STATUSES",
    "AttemptRecord",
    "BuildResult",
    "Progress",
    "build",
]
