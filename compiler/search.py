"""The search: per generate node, candidate settings scored on the validation split of
the target model, coordinate by coordinate, by successive halving on minibatches
(docs/compiler.md, "The search").

One coordinate at a time, each over every node before the next (keyed choices where
compiler.hierarchy finds a parent field, few-shot, prompt, label prior, then the gates
that cost calls: three draws of which two must agree, and reasoning first), the
incumbent and the coordinate's other values are scored on the first `MIN_BATCH`
validation cases; the better half goes on to twice as many cases, until one is left or the batch is the whole
validation split. The survivor replaces the incumbent only when it scores higher on the
whole split (ties keep the incumbent: fewer changes, fewer tokens). A pass over every
coordinate that changes nothing ends the search, as does the budget of target calls (a
trial that the budget cannot pay for, at the incumbent's calls per case, is not
started) or a cancel. Every trial is a row of `search/trials.jsonl`.

`bootstrap` examples are offered once the arm's starting setting has run on the train
split (its calls count against the budget; it is not a trial row), and proposed
instruction texts once the proposer (`propose`, compiler.proposals with a model planner)
has answered for the node."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.plan import Plan, PlanNode
from compiler.target_cache import CacheCounts
from compiler.trials import (
    DRAWS,
    PROMPT_STYLES,
    CaseOutcome,
    NodeSetting,
    Setting,
    TrialRunner,
    closed_fields,
    plan_key,
    setting_dict,
)

MIN_BATCH = 8
MAX_PASSES = 2
FEWSHOT_CHOICES: tuple[tuple[int, str], ...] = ((0, "nearest"), (1, "nearest"), (3, "nearest"), (3, "fixed"))
PRIOR_FILLERS = 3  # calls one prior measurement makes (runtime.measure_prior's fillers)
MATCHED_SHOTS = 2  # examples shown with keyed choices matched to the parent (benchmarks/routing_layouts.py)
BOOTSTRAP = (3, "bootstrap")  # offered when the budget can pay for a run of the train split
PROMPT_CHOICES = PROMPT_STYLES
# structure first (it changes what the others are scored on); the costly gates last
COORDINATES = ("hierarchy", "fewshot", "prompt", "prior", "draws", "reasoning")


@dataclass(frozen=True)
class Trial:
    """One scored candidate: a row of search/trials.jsonl."""

    trial: int
    arm: str
    coordinate: str
    setting: Setting
    cases: int
    passed: int
    mean_score: float
    calls: int  # new target calls this trial made
    calls_total: int  # new target calls so far, all trials
    kept: bool = False

    @property
    def score(self) -> float:
        return self.passed / self.cases if self.cases else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial,
            "arm": self.arm,
            "coordinate": self.coordinate,
            "setting": setting_dict(self.setting),
            "cases": self.cases,
            "passed": self.passed,
            "score": round(self.score, 4),
            "mean_score": round(self.mean_score, 4),
            "calls": self.calls,
            "calls_total": self.calls_total,
            "kept": self.kept,
        }


@dataclass(frozen=True)
class SearchResult:
    arm: str
    setting: Setting
    validation: list[CaseOutcome]
    stopped: str  # converged | passes (MAX_PASSES, still improving) | budget | cancelled


class Search:
    """The search of one arm (the planned pack, or the one-call pack)."""

    def __init__(
        self,
        arm: str,
        plan: Plan,
        runner: TrialRunner,
        validation: Sequence[str],
        counts: CacheCounts,
        budget: int,
        log: Path,
        *,
        trial_offset: int = 0,
        cancel: threading.Event | None = None,
        on_trial: Callable[[Trial], None] | None = None,
        propose: Callable[[str, Setting, list[CaseOutcome]], Sequence[str]] | None = None,
    ) -> None:
        self.arm = arm
        self.plan = plan
        self.runner = runner
        self.validation = list(validation)
        self.counts = counts
        self.budget = budget
        self.log = log
        self.trials = trial_offset
        self.cancel = cancel
        self.on_trial = on_trial
        self.calls_per_case = 3.0  # until the first trial measures it
        self.stopped_early = False
        self.bootstrap_calls = 0  # target calls the train run for bootstrap examples made
        self.best: list[CaseOutcome] = []  # the incumbent's outcomes on the whole validation split
        self.propose = propose

    def nodes(self) -> list[str]:
        return [n.id for n in self.plan.nodes if n.kind == "generate"]

    def start(self) -> Setting:
        return start_setting(self.plan, bool(self.runner.train))

    def run(self) -> SearchResult:
        incumbent = self.start()
        if not self.affordable(len(self.validation)):
            return SearchResult(self.arm, incumbent, [], "budget")
        best = self.best = self.trial("start", incumbent, self.validation, kept=True)
        stopped = "passes"  # MAX_PASSES passes, each of which changed something
        for _ in range(MAX_PASSES):
            improved = False
            # each coordinate over every node before the next: structure first, across the graph
            for coordinate, node in [(c, n) for c in COORDINATES for n in self.nodes()]:
                variants = self.variants(incumbent, node, coordinate)
                if len(variants) < 2:
                    continue
                winner, scored = self.halving(f"{node}.{coordinate}", variants, best)
                if winner != incumbent and _rank(scored) > _rank(best):
                    incumbent, best, improved = winner, scored, True
                    self.best = best
                    self.mark_kept(winner, scored)
                if self.stopped_early:
                    return SearchResult(self.arm, incumbent, best, "cancelled" if self.cancelled() else "budget")
            if not improved:
                stopped = "converged"
                break
        return SearchResult(self.arm, incumbent, best, stopped)

    def variants(self, incumbent: Setting, node: str, coordinate: str) -> list[Setting]:
        """The incumbent first, then the coordinate's other values."""
        current = dict(incumbent)[node]
        values: list[NodeSetting]
        if coordinate == "fewshot":
            if not self.runner.train:
                return [incumbent]
            choices = list(FEWSHOT_CHOICES)
            if self.bootstrap_ready():
                choices.append(BOOTSTRAP)
            values = [dataclasses.replace(current, shots=k, strategy=s) for k, s in choices]
        elif coordinate == "prompt":
            proposed = self.proposed(node, incumbent)
            values = [dataclasses.replace(current, prompt=p) for p in (*PROMPT_CHOICES, *proposed)]
        elif coordinate == "prior":
            if not self.prior_ready(incumbent, node):
                return [incumbent]
            values = [dataclasses.replace(current, prior=p) for p in (False, True)]
        elif coordinate == "draws":
            if self.planned(node).samples > 1:  # the plan's own draws: turning them off is not ours to try
                return [incumbent]
            values = [dataclasses.replace(current, draws=d) for d in (1, DRAWS)]
        elif coordinate == "reasoning":
            if self.planned(node).two_stage:
                return [incumbent]
            values = [dataclasses.replace(current, two_stage=t) for t in (False, True)]
        else:
            if node not in self.runner.keyed(self.plan):
                return [incumbent]
            values = [dataclasses.replace(current, hierarchy=h, matched=False) for h in (False, True)]
            if current.shots > 0:  # examples of the parent's value: two, as measured best (docs/compiler.md)
                shots = min(current.shots, MATCHED_SHOTS)
                values.append(dataclasses.replace(current, hierarchy=True, matched=True, shots=shots))
        out = [incumbent]
        for value in values:
            candidate = tuple((n, value if n == node else s) for n, s in incumbent)
            if candidate not in out:
                out.append(candidate)
        return out

    def planned(self, node: str) -> PlanNode:
        return next(n for n in self.plan.nodes if n.id == node)

    def bootstrap_ready(self) -> bool:
        """Whether `bootstrap` examples can be offered: the train run at the starting
        setting is done, or the budget can pay for it (then it runs here)."""
        if self.runner.has_bootstrap(self.arm, self.plan):
            return True
        # the train run must leave most of the budget to the search: at most a quarter of it
        if self.cancelled() or not self.affordable(4 * len(self.runner.train) + MIN_BATCH):
            return False
        before = self.counts.calls
        self.runner.bootstrap(self.arm, self.plan, self.start())
        self.bootstrap_calls += self.counts.calls - before
        return True

    def prior_ready(self, incumbent: Setting, node: str) -> bool:
        """Whether the node's label prior can be offered: it writes a closed-choice field and
        the target's prior was measured (a few calls, when the budget can pay for them)."""
        if node not in closed_fields(self.runner.induction, self.plan, self.runner.spec) or self.cancelled():
            return False
        if dict(incumbent)[node].hierarchy:  # measured under one parent value, the prior would be biased
            return False
        base = dataclasses.replace(dict(incumbent)[node], prior=False)
        measured = self.runner.priors.measured((self.arm, plan_key(self.plan)), node, base)
        if not measured and not self.affordable(PRIOR_FILLERS + MIN_BATCH):
            return False
        return self.runner.prior_for(self.arm, self.plan, incumbent, node) is not None

    def proposed(self, node: str, incumbent: Setting) -> list[str]:
        """Prompt values the proposer offers for `node`, from the incumbent's validation
        outcomes (none without a proposer)."""
        if self.propose is None or self.cancelled():
            return []
        return list(self.propose(node, incumbent, self.best))

    def halving(
        self, coordinate: str, candidates: list[Setting], best: list[CaseOutcome]
    ) -> tuple[Setting, list[CaseOutcome]]:
        """Successive halving over `candidates` (the incumbent first, whose whole-split
        outcomes are `best`): the survivor and its outcomes on the whole validation split.
        When the budget or a cancel stops it (`stopped_early`), the best candidate scored on
        the whole split so far (the incumbent at least)."""
        size = min(MIN_BATCH, len(self.validation))
        alive = list(candidates)
        whole: list[tuple[Setting, list[CaseOutcome]]] = [(candidates[0], best)]  # scored on the whole split
        while True:
            batch = self.validation[:size]
            scored: list[tuple[Setting, list[CaseOutcome]]] = []
            for candidate in alive:
                if candidate == candidates[0]:
                    scored.append((candidate, best[:size]))
                    continue
                if self.cancelled() or not self.affordable(size * _weight(candidate) / _weight(candidates[0])):
                    # stopped: the best candidate scored on the whole split so far still counts
                    self.stopped_early = True
                    return max(whole, key=lambda item: _rank(item[1]))
                outcomes = self.trial(coordinate, candidate, batch)
                scored.append((candidate, outcomes))
                if size == len(self.validation):
                    whole.append((candidate, outcomes))
            scored.sort(key=lambda item: _rank(item[1]), reverse=True)  # stable: the incumbent wins ties
            if size == len(self.validation) or (scored[0][0] == candidates[0] and len(scored) == 1):
                return scored[0]
            alive = [s for s, _ in scored[: math.ceil(len(scored) / 2)]]
            size = len(self.validation) if len(alive) == 1 else min(len(self.validation), size * 2)

    def trial(
        self, coordinate: str, setting: Setting, case_ids: Sequence[str], kept: bool = False
    ) -> list[CaseOutcome]:
        before = self.counts.calls
        outcomes = self.runner.score(self.arm, self.plan, setting, case_ids)
        made = self.counts.calls - before
        if outcomes:
            self.calls_per_case = max(1.0, sum(o.calls for o in outcomes) / len(outcomes))
        self.trials += 1
        row = Trial(
            self.trials,
            self.arm,
            coordinate,
            setting,
            len(outcomes),
            sum(o.passed for o in outcomes),
            sum(o.score for o in outcomes) / max(len(outcomes), 1),
            made,
            self.counts.calls,
            kept,
        )
        self.write(row)
        return outcomes

    def mark_kept(self, setting: Setting, outcomes: list[CaseOutcome]) -> None:
        """A survivor on the whole split: a row that says so (no new calls)."""
        self.trials += 1
        self.write(
            Trial(
                self.trials,
                self.arm,
                "survivor",
                setting,
                len(outcomes),
                sum(o.passed for o in outcomes),
                sum(o.score for o in outcomes) / max(len(outcomes), 1),
                0,
                self.counts.calls,
                True,
            )
        )

    def write(self, row: Trial) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row.to_dict(), sort_keys=True) + "\n")
        if self.on_trial is not None:
            self.on_trial(row)

    def affordable(self, cases: float) -> bool:
        """Whether `cases` more cases fit the budget. The budget counts the calls the
        search used, made or answered from the cache, so a rebuild with the same cache
        takes the same path and makes no call."""
        used = self.counts.calls + self.counts.hits
        rate = max(1.0, sum(o.calls for o in self.best) / len(self.best)) if self.best else self.calls_per_case
        return used + cases * rate <= self.budget

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


def start_setting(plan: Plan, train: bool) -> Setting:
    """Where the search starts: 3 nearest examples (none without a train split) and the
    planner's prompt on every generate node."""
    shots = 3 if train else 0
    return tuple((n.id, NodeSetting(shots=shots)) for n in plan.nodes if n.kind == "generate")


def _weight(setting: Setting) -> float:
    """Calls per case a setting makes, relative units: draws, twice over when reasoning first."""
    return sum(s.draws * (2 if s.two_stage else 1) for _, s in setting) / max(len(setting), 1)


def _rank(outcomes: Sequence[CaseOutcome]) -> tuple[int, float, float]:
    """Higher is better: cases passed, partial credit, then fewer tokens."""
    return (
        sum(o.passed for o in outcomes),
        sum(o.score for o in outcomes),
        -sum(o.tokens for o in outcomes) / max(len(outcomes), 1),
    )


__all__ = [
    "BOOTSTRAP",
    "COORDINATES",
    "FEWSHOT_CHOICES",
    "MATCHED_SHOTS",
    "MIN_BATCH",
    "PROMPT_CHOICES",
    "Search",
    "SearchResult",
    "Trial",
    "start_setting",
]
