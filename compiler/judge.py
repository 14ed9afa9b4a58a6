"""Judging on the target: after the attempts loop, the best plan and the one-call plan
are each searched on the validation split of the target model, measured on the test
split, and compared with each other and with the trivial baseline (docs/compiler.md,
"The verdict"). Writes `split.json`, `search/trials.jsonl` and `verdict.json` into the
work dir, and the chosen pack into `out`."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.context_fit import FitRule, apply_rule, fit_rule
from compiler.induce import Induction, induce
from compiler.offline import offline_script
from compiler.one_call import one_call_plan
from compiler.plan import Plan
from compiler.planners.model import ModelPlanner
from compiler.planners.shared import Planner
from compiler.proposer import Proposer
from compiler.search import Search, SearchResult, Trial, start_setting
from compiler.spec import Spec
from compiler.splits import Split, split_gold
from compiler.target_cache import CachedBackend
from compiler.tools import ToolSpec
from compiler.trials import PROBE_MIN, TrialRunner, setting_dict
from compiler.verdict import (
    Arm,
    baseline_outcomes,
    choose_threshold,
    mcnemar,
    measure_auto,
    nearest_outcomes,
    score_of,
)
from compiler.workdir import write_json
from runtime import Scorer, Tool, baseline_summary, load_pack, open_backend

VERDICT_FILE = "verdict.json"
SPLIT_FILE = "split.json"
TRIALS_FILE = "search/trials.jsonl"
CHOSEN_DIR = "chosen"  # the judged pack, in the work dir (copied to `out` when one is given)
PACK_SHARE = 0.55  # of the budget, the most the planned pack's search may spend; one call's up to ONE_CALL_SHARE
ONE_CALL_SHARE = 0.85  # the rest pays for the test split, which is always run


@dataclass
class Verdict:
    """What judging found: the document verdict.json holds, and the exit code."""

    document: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return int(self.document.get("exit_code", 1))

    @property
    def sentence(self) -> str:
        return str(self.document.get("sentence", ""))

    @property
    def chosen(self) -> str | None:
        value = self.document.get("chosen")
        return str(value) if value is not None else None


@dataclass
class JudgeInputs:
    spec: Spec
    plan: Plan
    induction: Induction
    catalogue: Mapping[str, ToolSpec]
    work: Path
    target: str | None
    tools: Mapping[str, Tool] | None = None
    cache: Path | None = None
    budget: int | None = None
    concurrency: int = 4
    cancel: threading.Event | None = None
    on_trial: Callable[[Trial], None] | None = None
    attempt_calls: int = 0  # target calls the attempts' validation scores made (compiler.loop)
    planner: Planner | None = None  # a model planner proposes instruction texts (compiler.proposer)
    planner_tokens: int = 0  # what the attempts' planning already spent of the planner budgets
    planner_cost: float = 0.0
    scorers: Mapping[str, Scorer] | None = None  # the host's scorers, bound to every pack loaded (compiler.scorers)


def not_judged(inputs: JudgeInputs, split: Split) -> Verdict:
    sentence = (
        "nothing was judged on a model: the offline test model only checks the graph's structure; "
        "pass --target MODEL (or set the spec's model) to search and judge the pack on the model it will run on"
    )
    doc = {
        "target": None,
        "judged": False,
        "exit_code": 1,
        "sentence": sentence,
        "chosen": None,
        "split": _split_counts(split),
        "arms": {},
        "mcnemar": None,
        "auto": None,
        "cost": {"target_calls": 0, "cached_calls": 0, "tokens": 0},
    }
    return Verdict(doc)


def held_out_induction(spec: Spec, split: Split) -> Induction:
    """The schemas the target's packs get: induced from the train and validation cases
    only (with the spec's declared `values`), so no label that only test cases show
    reaches a grammar or a prompt's list of values."""
    test = set(split.test)
    cases = [(c.input, c.expected) for c in spec.gold if c.id not in test]
    return induce(cases, list(spec.outputs), declared=spec.declared_values())


def scored(spec: Spec, split: Split) -> Split:
    """The split the arms are scored on: validation and test cases that expect at least
    one output. A case that expects none checks only its route, which one call and the
    baseline cannot have, so it would count as passed for them and only them."""
    expects = {c.id for c in spec.gold if c.expected}
    return dataclasses.replace(
        split,
        validation=tuple(i for i in split.validation if i in expects),
        test=tuple(i for i in split.test if i in expects),
    )


def _open(inputs: JudgeInputs) -> tuple[Split, CachedBackend, TrialRunner]:
    """The split, the cached target and the trial runner a judging (or an attempt's
    validation score) works with."""
    assert inputs.target is not None
    split = scored(inputs.spec, split_gold(inputs.spec))
    backend = CachedBackend(open_backend(inputs.target), inputs.cache or inputs.work / "cache", inputs.target)
    runner = TrialRunner(
        inputs.spec,
        held_out_induction(inputs.spec, split),
        inputs.catalogue,
        inputs.work / "search",
        backend,
        model=inputs.target,
        train=split.train,
        tools=inputs.tools,
        scorers=inputs.scorers,
        concurrency=inputs.concurrency,
        cancel=inputs.cancel,
    )
    return split, backend, runner


def validation_score(inputs: JudgeInputs, arm: str) -> tuple[float, int]:
    """An attempt's plan on the validation split of the target, at the search's starting
    setting (so the search's first trial is then answered from the cache): the share of
    validation cases passed and the target calls it made. Attempts are ranked by it."""
    split, backend, runner = _open(inputs)
    try:
        outcomes = runner.score(arm, inputs.plan, start_setting(inputs.plan, bool(split.train)), split.validation)
    finally:
        backend.close()
    return (sum(o.passed for o in outcomes) / len(outcomes) if outcomes else 0.0), backend.counts.calls


def judge(inputs: JudgeInputs, out: Path | None, write_pack: Callable[[Path, Path], None]) -> Verdict:
    """Split, search both arms, measure on test, decide, write the chosen pack to `out`
    (through `write_pack(source_dir, out)`, which swaps it in) and verdict.json."""
    spec, work = inputs.spec, inputs.work
    split = split_gold(spec)
    for stale in (work / VERDICT_FILE, work / CHOSEN_DIR):  # a cancelled judging leaves neither behind
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    write_json(work / SPLIT_FILE, split.to_dict())
    if inputs.target is None:
        verdict = not_judged(inputs, split)
        write_json(work / VERDICT_FILE, verdict.document)
        return verdict
    budget = inputs.budget if inputs.budget is not None else spec.budgets.target_calls
    split, backend, runner = _open(inputs)
    try:
        log = work / TRIALS_FILE
        if log.exists():
            log.unlink()  # a resumed judge replays its trials from the cache, call-free
        proposers: list[Proposer] = []
        pack = Search(
            "pack",
            inputs.plan,
            runner,
            split.validation,
            backend.counts,
            int(budget * PACK_SHARE),
            log,
            cancel=inputs.cancel,
            on_trial=inputs.on_trial,
            propose=_proposer(inputs, inputs.plan, runner, proposers),
        ).run()
        one_plan = one_call_plan(spec, inputs.catalogue)
        one: SearchResult | None = None
        if one_plan is not None and not _cancelled(inputs):
            one = Search(
                "one_call",
                one_plan,
                runner,
                split.validation,
                backend.counts,
                int(budget * ONE_CALL_SHARE),
                log,
                trial_offset=_count_lines(log),
                cancel=inputs.cancel,
                on_trial=inputs.on_trial,
                propose=_proposer(inputs, one_plan, runner, proposers),
            ).run()
        if _cancelled(inputs):
            return Verdict({"judged": False, "exit_code": 1, "sentence": "cancelled", "cancelled": True})
        arms = {"pack": _arm(runner, "pack", inputs.plan, pack, split)}
        if one is not None and one_plan is not None:
            arms["one_call"] = _arm(runner, "one_call", one_plan, one, split)
        document, chosen = decide(spec, split, arms, runner)
        document["cost"] = {
            **backend.counts.to_dict(),
            "target_calls": backend.counts.calls,
            "cached_calls": backend.counts.hits,
            "tokens": backend.counts.prompt_tokens + backend.counts.completion_tokens,
            "budget": budget,
            "attempt_calls": inputs.attempt_calls,
            "proposal_requests": sum(p.asked for p in proposers),
            "proposal_tokens": (proposers[-1].tokens - inputs.planner_tokens) if proposers else 0,
        }
        document["target"] = inputs.target
        document["stopped"] = {"pack": pack.stopped, "one_call": one.stopped if one else None}
        if chosen is not None:
            plan = inputs.plan if chosen == "pack" else one_plan
            result = pack if chosen == "pack" else one
            assert plan is not None and result is not None
            threshold = document["auto"]["threshold"]
            winner = arms[chosen]
            if not any(o.confidence is not None for o in winner.validation + winner.test):
                threshold = None  # nothing measured a confidence (no logprobs, no closed field): no gate to set
            staged = work / CHOSEN_DIR
            if staged.exists():
                shutil.rmtree(staged)
            runner.emit(chosen, plan, result.setting, staged, floor=threshold if threshold else None)
            _add_offline(staged, plan, spec, inputs.catalogue)
            rule = fit_rule(spec, winner.validation)  # learned on validation; test cases are only run again
            if rule is not None:
                apply_rule(staged, rule)
                over = [o.id for o in winner.validation + winner.test if o.overflow]
                document["context"].update(refit(staged, over, runner, rule))
            document["pack"] = CHOSEN_DIR
            if out is not None:
                write_pack(staged, out)
                document["written"] = str(out)
        write_json(work / VERDICT_FILE, document)
        return Verdict(document)
    finally:
        backend.close()


def refit(pack_dir: Path, case_ids: list[str], runner: TrialRunner, rule: FitRule) -> dict[str, Any]:
    """The overflowing cases run again on the judged pack, under its truncation rule."""
    pack = load_pack(pack_dir, tools=set(runner.tools) if runner.tools is not None else None, scorers=runner.scorers)
    outcomes = runner.run(pack, case_ids, "refit")
    return {
        "rule": rule.to_dict(),
        "truncated_cases": len(case_ids),
        "overflow_after_rule": sum(o.overflow for o in outcomes),
        "passed_after_rule": sum(o.passed for o in outcomes),
    }


def _proposer(inputs: JudgeInputs, plan: Plan, runner: TrialRunner, made: list[Proposer]) -> Proposer | None:
    """A source of proposed instruction texts for one arm, when the planner is a model;
    each arm's proposer starts from what the ones before it spent."""
    if not isinstance(inputs.planner, ModelPlanner):
        return None
    tokens = made[-1].tokens if made else inputs.planner_tokens
    cost = made[-1].cost_usd if made else inputs.planner_cost
    folder = inputs.cache or inputs.work / "cache"  # beside the target cache: a rebuild with it asks nothing again
    proposer = Proposer(inputs.planner, inputs.spec, plan, runner, folder, tokens, cost, inputs.cancel)
    made.append(proposer)
    return proposer


def _arm(runner: TrialRunner, name: str, plan: Plan, result: SearchResult, split: Split) -> Arm:
    """The arm at its searched setting; an arm whose search the budget never let start is
    still scored on validation (at its starting setting), so no arm wins by default."""
    validation = result.validation or runner.score(name, plan, result.setting, split.validation)
    test = runner.score(name, plan, result.setting, split.test) if split.test else []
    return Arm(name, validation, test, setting_dict(result.setting))


def decide(spec: Spec, split: Split, arms: dict[str, Arm], runner: TrialRunner) -> tuple[dict[str, Any], str | None]:
    """The verdict document and the arm whose pack is written (None: neither beats the
    baseline). The pack wins only when it beats the baseline and one call on validation;
    the nearest known case copied is scored beside them and named when it does as well."""
    rules = _rules(runner)
    by_id = {c.id: c for c in spec.gold}
    # the trivial baseline learns from train (validation when there is none), never from test
    train_expected = [by_id[i].expected for i in split.train or split.validation]
    answers = baseline_summary(rules, train_expected)["values"]
    base = Arm(
        "baseline",
        baseline_outcomes(rules, answers, [(i, by_id[i].expected) for i in split.validation]),
        baseline_outcomes(rules, answers, [(i, by_id[i].expected) for i in split.test]),
        {"answers": answers},
    )
    # ... and the nearest known case's answers copied, from the same cases (never the case itself)
    known = [(i, by_id[i].input, by_id[i].expected) for i in split.train or split.validation]
    near = Arm(
        "nearest",
        nearest_outcomes(rules, known, [(i, by_id[i].input, by_id[i].expected) for i in split.validation]),
        nearest_outcomes(rules, known, [(i, by_id[i].input, by_id[i].expected) for i in split.test]),
    )
    pack, one = arms["pack"], arms.get("one_call")
    p, b = score_of(pack.validation).passed, score_of(base.validation).passed
    o = score_of(one.validation).passed if one is not None else None
    n = len(split.validation)
    if p > b and (o is None or p > o):
        chosen, code = "pack", 0
        sentence = f"the pack wins on validation: {p}/{n} vs one call {o if o is not None else 'n/a'}/{n} and the trivial baseline {b}/{n}"
    elif o is not None and o > b and o >= p:
        chosen, code = "one_call", 1
        sentence = (
            f"one call does as well as the pack or better on validation ({o}/{n} vs {p}/{n}; trivial baseline "
            f"{b}/{n}): the one-call pack was written instead"
        )
    else:
        chosen, code = None, 1
        sentence = (
            f"neither the pack ({p}/{n}) nor one call ({o if o is not None else 'n/a'}/{n}) beats the trivial "
            f"baseline ({b}/{n}) on validation: no pack is good enough to write"
        )
    # Shown, not yet decided on (docs/decisions.md): where copying the nearest known case
    # does as well as the arm chosen, the sentence says so.
    k = score_of(near.validation).passed
    best = p if chosen == "pack" else (o or 0) if chosen == "one_call" else max(p, o or 0, b)
    if k and k >= best:
        sentence += f"; copying the nearest known case's answers does as well or better ({k}/{n}), with no model"
    winner = arms.get(chosen or "pack", pack)
    tier = choose_threshold(winner.validation, spec.auto_accuracy)
    tier = measure_auto(tier, winner.test, one.test if one is not None else None)
    doc = {
        "judged": True,
        "exit_code": code,
        "sentence": sentence,
        "chosen": chosen,
        "split": _split_counts(split),
        "unseen_labels": split.unseen_labels,
        "arms": {
            "pack": pack.to_dict(),
            "one_call": one.to_dict() if one is not None else None,
            "baseline": base.to_dict(),
            "nearest": near.to_dict(),
        },
        "mcnemar": mcnemar(pack.test, one.test) if one is not None else None,
        "context": {
            "limit": None,  # not probed: a call that does not fit fails its node and counts below
            "max_prompt_tokens": max((o.prompt_tokens for o in winner.validation + winner.test), default=0),
            "truncated_cases": 0,  # cases whose input the judged pack's truncation rule cuts (refit)
            "overflow_cases": sum(o.overflow for o in winner.validation + winner.test),
        },
        "auto": {
            **tier.to_dict(),
            "target": spec.auto_accuracy,
            "threshold": tier.threshold if tier.threshold is None else max(tier.threshold, PROBE_MIN),
        },
    }
    return doc, chosen


def _rules(runner: TrialRunner) -> Mapping[str, Any]:
    for pack in runner.loaded():
        return pack.fields
    return {}


def _add_offline(pack_dir: Path, plan: Plan, spec: Spec, catalogue: Mapping[str, ToolSpec]) -> None:
    """The offline test model, for structure tests only (the manifest's model is the target)."""
    (pack_dir / "fakes").mkdir(exist_ok=True)
    script = offline_script(plan, spec, catalogue)
    (pack_dir / "fakes" / "offline.json").write_text(json.dumps(script, indent=2) + "\n")


def _split_counts(split: Split) -> dict[str, Any]:
    return {
        "train": len(split.train),
        "validation": len(split.validation),
        "test": len(split.test),
        "method": split.method,
        "seed": split.seed,
        "left_out": len(split.left_out),
    }


def _cancelled(inputs: JudgeInputs) -> bool:
    return inputs.cancel is not None and inputs.cancel.is_set()


def _count_lines(path: Path) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


__all__ = [
    "CHOSEN_DIR",
    "SPLIT_FILE",
    "TRIALS_FILE",
    "VERDICT_FILE",
    "JudgeInputs",
    "Verdict",
    "judge",
    "not_judged",
    "validation_score",
]
