"""Real small models on realistic tasks: does a pack beat one constrained call?

Five packs of three tasks, gold cases written for this benchmark (benchmarks/packs/):
  helpdesk_routing   hierarchical single-label: customer message -> department -> sub-issue
                     (the sub-issue's choices come from labels/subissues.yaml per department),
                     a logprob `confidence` gate on both nodes
  helpdesk_routing_flat
                     the same task in one node: both labels in one answer, an `assert` that
                     the sub-issue is its department's, a `confidence` gate on the sub-issue
                     (its one call is helpdesk_routing's)
  review_aspects     multi-label: app review -> set of aspects (price, bugs, ui, performance,
                     support), three draws that must agree on the set
  shipping_details   extraction: short email -> name, street, city, postcode, country,
                     three draws that must agree on all five
  shipping_details_gated
                     the same task in one greedy draw, a `confidence` gate on the least sure
                     of the five fields (its one call is shipping_details')

Model: SmolLM2-135M-Instruct (Q4_1) on llama.cpp's own llama-server, fetched and started
by tests/support/model_servers.py, a fresh server for each arm of each task so that no
arm finds another's prompts in the server's cache (or --url for a server already
running, shared by every arm). The arms take turns, BLOCK cases at a time (the first to
go rotates), so that the machine's speed drifting during a task weighs on every arm
alike: the seconds ratios are taken over the same stretch of time. (With --url every arm
shares the one server's cache, so an arm may find the prompts of the arm before it.)

Arms, on the same cases:
  (a) pack        the pack, run by the runtime's own evaluator (`runtime.evaluate`), with
                  every gate opened (confidence min 1e-6, agree 1, draw_all) so that each
                  case's answer and confidence are both known; the gate is then applied
                  afterwards at any threshold, which is what the gated pack decides (it makes fewer calls:
                  its draws stop once the vote is decided, and a held node's successors
                  are not run; arm "written" measures that)
  written         the pack as written (gates as calibrated, quorum draws that stop once
                  decided): what a user runs and pays for; its escalated cases go to a
                  person, so its exact counts them as misses and its auto tier is reported
  (b) one call    one model call with the pack's system prompt, the same few-shot
                  examples (nearest by word-set Jaccard, as many as the pack's hungriest
                  node takes unless --shots N, shown as the runtime shows them: the
                  nearest last) and the union of the pack's node schemas as the grammar
                  (benchmarks/one_call/<task>.txt)
  (c) no grammar  the same call without a grammar; the reply's outermost {...} is parsed
The grammar of arms (a) and (b) goes out in --grammar mode: gbnf by default, llama-server's
compact grammar (no whitespace tokens; what `packforge endpoints check` suggests there),
on an endpoint with `prefill=true` unless --prefill false (the answer's opening, `{"` and
its first name, is read with the prompt instead of decoded; docs/endpoints.md "Prefill").
  (d) baseline    the trivial baseline: the most frequent expected value of each field in
                  the evalset, for every case
  (e) nearest     no model either: the answer of the example nearest the case (the one
                  the one-call arm shows last), copied; how far the examples alone go

Scoring: every arm is scored here by one function over the committed values, with the
pack's `fields:` rules (exact, loose, set, number, text as docs/pack-format.md defines
them): exact = every expected field matches; score = the share that match. Intervals are
95% Wilson intervals.

Calibration (arm a): the cases are split by position (even -> calibration half, odd ->
measurement half). A case's confidence is the lowest confidence among its gated steps
(logprob p, or the share of agreeing draws). The threshold is the lowest one at which
the calibration half's auto tier reaches --target-auto-accuracy; if none does, the one
with the best auto-tier accuracy among those that keep at least 40% of the calibration
half automatic. Auto share and auto-tier accuracy are then measured on the other half,
beside the one-call accuracy on that same half. A second threshold is chosen for the
issue's bar (+15 points over one call at >= 40% auto share): on the calibration half,
the one with the best auto-tier accuracy among those that keep at least 40% automatic
(ties: the lower threshold); it is measured on the other half the same way, and the bar
is judged there.

--from-rows FILE re-summarises a committed raw-rows file without calling a model.

    .venv/bin/python benchmarks/real_models.py [--tasks a,b] [--limit N] [--arms pack,written,one_call,no_grammar,baseline,nearest]
        [--model smollm2] [--url http://127.0.0.1:PORT/v1] [--grammar gbnf|json_schema]
        [--prefill true|false] [--target-auto-accuracy 0.95] [--json]
    .venv/bin/python benchmarks/real_models.py --from-rows benchmarks/results/real_models.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import read_rows, write_rows
from runtime import (
    Backend,
    FieldRule,
    ModelCall,
    PackforgeError,
    compare_key,
    evaluate,
    load_pack,
    open_backend,
    rule_for,
    similarity,
    values_match,
    wilson_interval,
)

HERE = Path(__file__).resolve().parent
PACKS = HERE / "packs"
ONE_CALL = HERE / "one_call"
RESULTS = HERE / "results" / "real_models.jsonl"
TASKS = ("helpdesk_routing", "helpdesk_routing_flat", "review_aspects", "shipping_details", "shipping_details_gated")
# A pack that lays out another task anew in one verified call (the flat routing pack,
# the gated extraction pack): its one call is that task's own.
ONE_CALL_OF = {"helpdesk_routing_flat": "helpdesk_routing", "shipping_details_gated": "shipping_details"}
ARMS = ("pack", "written", "one_call", "no_grammar", "baseline", "nearest")
NO_MODEL_ARMS = ("baseline", "nearest")
MODELS = ("smollm2",)
MIN_AUTO_SHARE = 0.40  # the bar: the auto tier keeps at least 40% of cases
BAR_POINTS = 0.15  # ... at an accuracy at least 15 points above one call's
CONCURRENCY = 2  # the server runs two slots (-np 2)
GRAMMAR_ARMS = ("pack", "written", "one_call")  # the arms whose calls carry the grammar (and prefill)
BLOCK = 10  # cases an arm runs before the next arm takes its turn
MIN_CASES = 10  # no threshold is chosen on fewer calibration cases in its auto tier
OPEN_GATE = 1e-6  # the confidence floor of the opened pack (arm a)


# -- the task, read from the pack's files (so arms b-d run on any runtime) ---------------


@dataclass
class Task:
    name: str
    root: Path
    manifest: dict[str, Any]
    graph: dict[str, Any]
    cases: list[dict[str, Any]]
    examples: list[dict[str, Any]]
    system: str
    one_call_prompt: str
    union_schema: dict[str, Any]
    shots: int
    max_tokens: int

    @property
    def rules(self) -> dict[str, FieldRule]:
        """The pack's `fields:` rules, compared exactly as the runtime's scoring does."""
        return {name: FieldRule(**spec) for name, spec in (self.manifest.get("fields") or {}).items()}

    @property
    def fields(self) -> list[str]:
        return list(self.union_schema["properties"])


def load_task(name: str) -> Task:
    root = PACKS / name
    manifest = yaml.safe_load((root / "manifest.yaml").read_text())
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    properties: dict[str, Any] = {}
    shots, max_tokens = 0, 0
    for node_id, node in graph["nodes"].items():
        if node.get("kind") != "generate":
            continue
        schema = json.loads((root / "grammars" / f"{node_id}.json").read_text())
        properties.update(schema["properties"])
        shots = max(shots, int((node.get("examples") or {}).get("count", 0)))
        max_tokens += int(node.get("max_tokens", 256))
    union = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    system = (root / manifest["system"]).read_text().strip() if manifest.get("system") else ""
    one_call = ONE_CALL_OF.get(name, name)
    own_system = ONE_CALL / f"{one_call}.system.txt"
    if own_system.exists():  # the pack spreads its instructions over node system prompts
        system = own_system.read_text().strip()
    return Task(
        name=name,
        root=root,
        manifest=manifest,
        graph=graph,
        cases=read_rows(root / "evalset.jsonl"),
        examples=read_rows(root / "examples.jsonl") if (root / "examples.jsonl").exists() else [],
        system=system,
        one_call_prompt=(ONE_CALL / f"{one_call}.txt").read_text(),
        union_schema=union,
        shots=shots,
        max_tokens=max_tokens,
    )


# -- scoring: the pack's `fields:` rules ----------------------------------------------------


def score(task: Task, expected: dict[str, Any], got: dict[str, Any] | None) -> tuple[bool, float]:
    """(every field matches, share of fields that match)."""
    if not expected:
        return True, 1.0
    got = got or {}
    hits = [
        name in got and values_match(rule_for(task.rules, name), want, got[name]) for name, want in expected.items()
    ]
    return all(hits), sum(hits) / len(hits)


def canonical(task: Task, name: str, value: Any) -> str:
    """A hashable key for a value under its field's rule (for modes and agreement)."""
    return repr(compare_key(rule_for(task.rules, name), value))


# -- few-shot and the one-call prompt -------------------------------------------------------


def nearest_examples(task: Task, inp: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The `count` examples nearest the input, nearest first: word-set Jaccard as the
    runtime's `strategy: nearest` measures it (runtime.fewshot), ties by file order."""
    ranked = sorted(enumerate(task.examples), key=lambda pair: (-similarity(inp, pair[1]["input"]), pair[0]))
    return [ex for _, ex in ranked[:count]]


def render(template: str, inp: dict[str, Any]) -> str:
    def fill(m: re.Match[str]) -> str:
        value = inp.get(m.group(1))
        return value if isinstance(value, str) else json.dumps(value)

    return re.sub(r"\{\{\s*input\.([A-Za-z0-9_]+)\s*\}\}", fill, template)


def one_call_messages(task: Task, inp: dict[str, Any]) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": task.system}] if task.system else []
    # Shown as the runtime shows a pack's (runtime.fewshot.choose): the nearest last, next
    # to the question. SmolLM2-135M mostly repeats the answer just before the question.
    for ex in reversed(nearest_examples(task, inp, task.shots)):
        answer = {name: ex["expected"].get(name) for name in task.fields}
        messages.append({"role": "user", "content": render(task.one_call_prompt, ex["input"])})
        messages.append({"role": "assistant", "content": json.dumps(answer, ensure_ascii=False, separators=(",", ":"))})
    messages.append({"role": "user", "content": render(task.one_call_prompt, inp)})
    return messages


def lenient_parse(text: str) -> dict[str, Any] | None:
    """The reply's outermost {...} as a JSON object, or None (arm c has no grammar)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        found = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None


# -- arms -------------------------------------------------------------------------------


@dataclass
class Row:
    task: str
    arm: str
    case: str
    expected: dict[str, Any]
    got: dict[str, Any] | None
    exact: bool
    score: float
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the server's prompt cache
    seconds: float = 0.0
    confidence: float | None = None
    auto_end: bool = True  # the run reached a normal end (not on_fail)
    parsed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Row:
        """A row as `to_dict` wrote it to a rows file (the run's own keys, model, grammar,
        slots and prefill, left out of `extra`)."""
        known = {f.name for f in dataclasses.fields(cls)}
        run_keys = ("model", "grammar", "slots", "prefill")
        extra = {k: v for k, v in raw.items() if k not in known and k not in run_keys}
        return cls(**{k: v for k, v in raw.items() if k in known and k != "extra"}, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "arm": self.arm,
            "case": self.case,
            "expected": self.expected,
            "got": self.got,
            "exact": self.exact,
            "score": round(self.score, 4),
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "seconds": round(self.seconds, 3),
            "confidence": self.confidence,
            "auto_end": self.auto_end,
            "parsed": self.parsed,
            **self.extra,
        }


# A gated one call's measure: (answer text, its logprobs, the parsed answer) -> each
# field's confidence (benchmarks/one_call_gated.py).
Confidences = Callable[[str, Any, "dict[str, Any] | None"], "dict[str, float | None]"]


def least_sure(confidences: dict[str, float | None]) -> float | None:
    """A case's confidence: its least sure field's; None when any field has none (such
    a case is never automatic: nothing vouches for it)."""
    known = [v for v in confidences.values() if v is not None]
    return min(known) if known and len(known) == len(confidences) else None


def run_one_call(
    task: Task, cases: list[dict[str, Any]], backend: Backend, grammar: bool, gate: Confidences | None = None
) -> list[Row]:
    """The one-call arm (or no_grammar's). With `gate`, arm "one_call_gated": the call
    asks for logprobs, the case's confidence is its least sure field's, and a case whose
    confidence cannot be read is held (auto_end False), as a gate holds it."""
    arm = ("one_call_gated" if gate else "one_call") if grammar else "no_grammar"

    def one(case: dict[str, Any]) -> Row:
        call = ModelCall(
            run_id=f"{arm}-{case['id']}",
            node="one_call",
            attempt=1,
            messages=one_call_messages(task, case["input"]),
            schema=task.union_schema if grammar else None,
            max_tokens=max(task.max_tokens, 64) if grammar else max(task.max_tokens, 128),
            temperature=0.0,
            case_id=case["id"],
            logprobs=gate is not None,
        )
        started = time.monotonic()
        reply = backend.complete(call)
        seconds = time.monotonic() - started
        got = lenient_parse(reply.text)
        exact, share = score(task, case["expected"], got)
        confidences = gate(reply.text, reply.logprobs, got) if gate else {}
        least = least_sure(confidences)
        return Row(
            task.name,
            arm,
            case["id"],
            case["expected"],
            got,
            exact,
            share,
            tokens=reply.prompt_tokens + reply.completion_tokens,
            prompt_tokens=reply.prompt_tokens,
            cached_tokens=reply.cached_tokens or 0,
            seconds=seconds,
            confidence=least,
            auto_end=gate is None or least is not None,
            parsed=got is not None,
            extra={"confidences": confidences} if gate else {},
        )

    with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
        return list(pool.map(one, cases))


def run_baseline(task: Task, cases: list[dict[str, Any]]) -> list[Row]:
    """Always the most frequent expected value of each field, counted over the evalset."""
    mode: dict[str, Any] = {}
    for name in task.fields:
        values = [c["expected"][name] for c in task.cases if name in c["expected"]]
        if not values:
            continue
        counts = Counter(canonical(task, name, v) for v in values)
        top = counts.most_common(1)[0][0]
        mode[name] = next(v for v in values if canonical(task, name, v) == top)
    rows = []
    for case in cases:
        exact, share = score(task, case["expected"], mode)
        rows.append(Row(task.name, "baseline", case["id"], case["expected"], mode, exact, share))
    return rows


def run_nearest(task: Task, cases: list[dict[str, Any]]) -> list[Row]:
    """The answer of the example nearest each case (word-set Jaccard), copied: no model."""
    rows = []
    for case in cases:
        nearest = nearest_examples(task, case["input"], 1)
        got = {name: nearest[0]["expected"].get(name) for name in task.fields} if nearest else None
        exact, share = score(task, case["expected"], got)
        rows.append(Row(task.name, "nearest", case["id"], case["expected"], got, exact, share, parsed=got is not None))
    return rows


@contextmanager
def pack_copy(task: Task, case_ids: set[str], opened: bool) -> Iterator[Path]:
    """A copy of the pack with only the measured cases. Opened (arm a): every gate opened
    (confidence min OPEN_GATE, agree 1) and every draw made (`draw_all`), so every case is
    answered and its agreement measured over all its draws. Not opened (arm "written"):
    the pack as written, which is what a user runs and pays for."""
    with tempfile.TemporaryDirectory(prefix=f"real-models-{task.name}-") as tmp:
        root = Path(tmp) / task.name
        shutil.copytree(task.root, root)
        if opened:
            graph = yaml.safe_load((root / "graph.yaml").read_text())
            for node in graph["nodes"].values():
                if "confidence" in node:  # the loader takes a min above 0: this one holds back no real answer
                    node["confidence"] = {**node["confidence"], "min": OPEN_GATE}
                if int(node.get("samples", 1)) > 1:
                    node["agree"] = 1
                    node["draw_all"] = True
                    node.pop("sure", None)  # every draw is made: none stands alone
                    node.pop("sure_fields", None)
            (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
        kept = [c for c in task.cases if c["id"] in case_ids]
        (root / "evalset.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in kept))
        yield root


def gates(task: Task) -> dict[str, dict[str, Any]]:
    """node -> its gate as written: {"kind": "confidence", "field": NAME or [NAME, ...]
    (`confidence: {fields: [...]}`), "min"} or {"kind": "agreement", "fields", "min"}."""
    out: dict[str, dict[str, Any]] = {}
    for node_id, node in task.graph["nodes"].items():
        if node.get("kind") != "generate":
            continue
        if "confidence" in node:
            out[node_id] = {
                "kind": "confidence",
                "field": node["confidence"].get("field") or node["confidence"]["fields"],
                "min": node["confidence"]["min"],
            }
        elif int(node.get("samples", 1)) > 1:
            samples = int(node["samples"])
            agree = int(node.get("agree", samples // 2 + 1))
            out[node_id] = {
                "kind": "agreement",
                "fields": node.get("agree_on") or node.get("writes", []),
                "min": agree / samples,
            }
    return out


def _agreement_share(task: Task, trace: Any, node: str, fields: list[str]) -> float | None:
    """The share of a node's verified draws that agree with the most common one."""
    keys = []
    for a in trace.attempts:
        if a.node != node or not a.ok or a.stage == "reasoning":
            continue
        answer = {**(lenient_parse(a.text) or {}), **(a.given or {})}  # a later draw of `sure_fields`: completed
        keys.append(tuple(canonical(task, f, answer.get(f)) for f in fields))
    if not keys:
        return None
    return Counter(keys).most_common(1)[0][1] / len(keys)


def run_pack_arm(
    task: Task, cases: list[dict[str, Any]], backend: Backend, opened: bool = True
) -> tuple[list[Row], str | None]:
    """The pack through the runtime's evaluator, opened (arm "pack") or as written (arm
    "written"); (rows, why not) when the pack cannot load."""
    arm = "pack" if opened else "written"
    with pack_copy(task, {c["id"] for c in cases}, opened) as root:
        try:
            pack = load_pack(root)
        except PackforgeError as exc:
            return [], f"the pack does not load on this runtime: {str(exc).splitlines()[0][:200]}"
        report = evaluate(pack, backend, concurrency=CONCURRENCY, model=backend.spec, run_prefix=f"{arm}-{task.name}")
    by_id = {c["id"]: c for c in cases}
    node_gates = gates(task)
    rows = []
    for result in report.cases:
        case = by_id[result.case_id]
        committed: dict[str, Any] = {}
        for step in result.trace.commits():
            committed.update(step.writes)
        got = {name: committed[name] for name in task.fields if name in committed}
        exact, share = score(task, case["expected"], got)
        confidences: dict[str, float | None] = {}
        for step in result.trace.steps:
            gate = node_gates.get(step.node)
            if gate is None:
                continue
            if gate["kind"] == "confidence":
                measured = getattr(step, "confidence", None) or {}
                confidences[step.node] = measured.get("p")
            else:
                confidences[step.node] = _agreement_share(task, result.trace, step.node, list(gate["fields"]))
        known = [p for p in confidences.values() if p is not None]
        totals = result.trace.totals()
        rows.append(
            Row(
                task.name,
                arm,
                case["id"],
                case["expected"],
                got,
                exact,
                share,
                tokens=int(totals["prompt_tokens"] + totals["completion_tokens"]),
                prompt_tokens=int(totals["prompt_tokens"]),
                cached_tokens=int(totals["cached_tokens"]),
                seconds=float(totals["latency_s"]),
                confidence=min(known) if known else None,
                # As written, a case is automatic only when no gate held it (trace tier "auto").
                auto_end=(result.tier != "failed" and result.status == "done")
                if opened
                else result.trace.tier == "auto",
                extra={
                    "confidences": confidences,
                    "status": result.status,
                    "path": result.path,
                    "model_calls": len(result.trace.attempts),
                    # why answers were turned down (runtime.verify's categories: "assert", "schema", ...)
                    "rejected": [a.category for a in result.trace.attempts if not a.ok],
                },
            )
        )
    order = {c["id"]: i for i, c in enumerate(cases)}
    rows.sort(key=lambda r: order[r.case])
    return rows, None


# -- calibration ----------------------------------------------------------------------------


def auto_at(rows: list[Row], threshold: float) -> list[Row]:
    return [r for r in rows if r.auto_end and (r.confidence is None or r.confidence >= threshold)]


def choose_threshold(rows: list[Row], target: float) -> float:
    """The calibrated threshold on `rows` (the calibration half), as the module says."""
    candidates = sorted({0.0, *(r.confidence for r in rows if r.confidence is not None)})
    for t in candidates:
        auto = auto_at(rows, t)
        if len(auto) >= MIN_CASES and sum(r.exact for r in auto) / len(auto) >= target:
            return t
    return threshold_for_share(rows)


def threshold_for_share(rows: list[Row]) -> float:
    """On `rows` (the calibration half): the threshold with the best auto-tier accuracy
    among those that keep at least MIN_AUTO_SHARE of the cases automatic (ties: lower)."""
    best, best_acc = 0.0, -1.0
    for t in sorted({0.0, *(r.confidence for r in rows if r.confidence is not None)}):
        auto = auto_at(rows, t)
        if len(auto) < max(MIN_CASES, MIN_AUTO_SHARE * len(rows)):
            continue
        acc = sum(r.exact for r in auto) / len(auto)
        if acc > best_acc:
            best, best_acc = t, acc
    return best


def _accuracy_on(rows: list[Row], ids: set[str]) -> float | None:
    """Exact accuracy of `rows` (another arm's) over the cases `ids` only."""
    same = [r for r in rows if r.case in ids]
    return sum(r.exact for r in same) / len(same) if same else None


def _measured(
    threshold: float, measure: list[Row], one: list[Row], baseline: list[Row] | None = None
) -> dict[str, Any]:
    auto = auto_at(measure, threshold)
    share = len(auto) / len(measure) if measure else 0.0
    accuracy = (sum(r.exact for r in auto) / len(auto)) if auto else None
    ids = {r.case for r in auto}
    one_acc = _accuracy_on(one, ids)  # one call on the very cases the auto tier kept
    return {
        "threshold": threshold,
        "auto": len(auto),
        "auto_passed": sum(r.exact for r in auto),
        "auto_share": share,
        "auto_accuracy": accuracy,
        "auto_accuracy_ci95": list(wilson_interval(sum(r.exact for r in auto), len(auto))),
        "one_call_accuracy_same_cases": one_acc,
        "baseline_accuracy_same_cases": _accuracy_on(baseline or [], ids),
        "bar_met": None
        if accuracy is None or one_acc is None
        else share >= MIN_AUTO_SHARE and accuracy >= one_acc + BAR_POINTS,
    }


# -- the table ------------------------------------------------------------------------------


def _ci(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}-{100 * hi:4.1f}]" if n else "   -"


def summarise(
    task: Task, arm_rows: dict[str, list[Row]], target: float, declared: float | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"task": task.name, "arms": {}}
    for arm, rows in arm_rows.items():
        n = len(rows)
        k = sum(r.exact for r in rows)
        lo, hi = wilson_interval(k, n)
        out["arms"][arm] = {
            "n": n,
            "exact": k / n if n else None,
            "exact_ci95": [lo, hi],
            "mean_score": statistics.fmean(r.score for r in rows) if rows else None,
            "parsed": sum(r.parsed for r in rows) / n if n else None,
            "tokens_per_case": statistics.fmean(r.tokens for r in rows) if rows else 0.0,
            "prompt_read_per_case": statistics.fmean(r.prompt_tokens - r.cached_tokens for r in rows) if rows else 0.0,
            "prompt_cached_per_case": statistics.fmean(r.cached_tokens for r in rows) if rows else 0.0,
            "seconds_per_case": statistics.fmean(r.seconds for r in rows) if rows else 0.0,
        }
    written = arm_rows.get("written")
    if written:
        # Its gates already held what they hold (auto_end): threshold 0 keeps exactly those.
        out["written"] = {
            **_measured(0.0, written, arm_rows.get("one_call", []), arm_rows.get("baseline", [])),
            "model_calls_per_case": statistics.fmean(int(r.extra.get("model_calls", 0)) for r in written),
            "in_sample": True,  # the gates as written were calibrated on these very cases
        }
    pack = arm_rows.get("pack")
    if pack:
        calib, measure = pack[0::2], pack[1::2]
        threshold = choose_threshold(calib, target)
        auto = auto_at(measure, threshold)
        ids = {r.case for r in measure}
        one = [r for r in arm_rows.get("one_call", []) if r.case in ids]
        if declared is None:  # the run's own gates: the pack as it is now
            declared = min((g["min"] for g in gates(task).values()), default=0.0)
        as_written = auto_at(pack, declared)
        out["calibration"] = {
            "target_auto_accuracy": target,
            "threshold": threshold,
            "calibration_cases": len(calib),
            "measured_cases": len(measure),
            "auto": len(auto),
            "auto_passed": sum(r.exact for r in auto),
            "auto_share": len(auto) / len(measure) if measure else None,
            "auto_accuracy": (sum(r.exact for r in auto) / len(auto)) if auto else None,
            "auto_accuracy_ci95": list(wilson_interval(sum(r.exact for r in auto), len(auto))),
            "one_call_accuracy_same_half": (sum(r.exact for r in one) / len(one)) if one else None,
            "one_call_accuracy_same_cases": _accuracy_on(one, {r.case for r in auto}),
            "baseline_accuracy_same_cases": _accuracy_on(arm_rows.get("baseline", []), {r.case for r in auto}),
            "pack_accuracy_same_half": sum(r.exact for r in measure) / len(measure) if measure else None,
            "no_confidence": sum(r.confidence is None for r in pack),
            "as_written": {
                "min": declared,
                "auto_share": len(as_written) / len(pack),
                "auto_accuracy": (sum(r.exact for r in as_written) / len(as_written)) if as_written else None,
                "in_sample": True,
            },
        }
        out["calibration"]["at_share"] = _measured(
            threshold_for_share(calib), measure, one, arm_rows.get("baseline", [])
        )
        cal = out["calibration"]
        # The bar is judged against one call on the same cases as the auto tier (on
        # them one call may do as well); the whole-half figure is kept beside it.
        if cal["auto_accuracy"] is not None and cal["one_call_accuracy_same_cases"] is not None:
            cal["bar_met"] = (
                cal["auto_share"] >= MIN_AUTO_SHARE
                and cal["auto_accuracy"] >= cal["one_call_accuracy_same_cases"] + BAR_POINTS
            )
    return out


def print_table(task: Task, summary: dict[str, Any], arm_rows: dict[str, list[Row]], skipped: dict[str, str]) -> None:
    print(f"\n{task.name}  ({len(next(iter(arm_rows.values()), []))} cases)")
    print(
        f"  {'arm':<11} {'exact [95% CI]':<22} {'score':>6} {'parsed':>7} {'tokens/case':>12} "
        f"{'prompt read':>12} {'cached':>7} {'s/case':>7}"
    )
    for arm, rows in arm_rows.items():
        s = summary["arms"][arm]
        print(
            f"  {arm:<11} {_ci(sum(r.exact for r in rows), len(rows)):<22} {s['mean_score']:6.2f} "
            f"{100 * s['parsed']:6.0f}% {s['tokens_per_case']:12.0f} {s.get('prompt_read_per_case', 0):12.0f} "
            f"{s.get('prompt_cached_per_case', 0):7.0f} {s['seconds_per_case']:7.2f}"
        )
    arms = summary["arms"]
    for arm in ("pack", "written"):
        if arm in arms and "one_call" in arms and arms["one_call"].get("prompt_read_per_case"):
            read = arms[arm]["prompt_read_per_case"] / arms["one_call"]["prompt_read_per_case"]
            secs = arms[arm]["seconds_per_case"] / max(arms["one_call"]["seconds_per_case"], 1e-9)
            print(f"  {arm} / one call: prompt tokens read {read:.2f}x, seconds {secs:.2f}x")
    w = summary.get("written")
    if w:
        same = w["one_call_accuracy_same_cases"]
        print(
            f"  as written (gates calibrated on these cases): {w['model_calls_per_case']:.2f} calls/case, auto share "
            f"{100 * w['auto_share']:.0f}%, auto-tier accuracy "
            + (_ci(w["auto_passed"], w["auto"]) if w["auto"] else "-")
            + (f"; one call on the same cases {100 * same:.0f}%" if same is not None else "")
        )
    for arm, why in skipped.items():
        print(f"  {arm:<11} skipped: {why}")
    cal = summary.get("calibration")
    if cal:
        one = cal["one_call_accuracy_same_half"]
        same = cal.get("one_call_accuracy_same_cases")
        base = cal.get("baseline_accuracy_same_cases")
        print(
            f"  auto tier at calibrated threshold {cal['threshold']:.3g} (calibrated on {cal['calibration_cases']}, "
            f"measured on {cal['measured_cases']}): share {100 * (cal['auto_share'] or 0):.0f}%, accuracy "
            + (_ci(cal["auto_passed"], cal["auto"]) if cal["auto"] else "-")
            + (f"; one call on the same cases {100 * same:.0f}%" if same is not None else "")
            + (f", baseline on them {100 * base:.0f}%" if base is not None else "")
            + (f" (one call on the whole half {100 * one:.0f}%)" if one is not None else "")
            + (f"; bar met: {cal['bar_met']}" if "bar_met" in cal else "")
        )
        s = cal["at_share"]
        print(
            f"  auto tier at >= {100 * MIN_AUTO_SHARE:.0f}% share, threshold {s['threshold']:.3g} (chosen on the "
            f"calibration half): share {100 * s['auto_share']:.0f}%, accuracy "
            + (_ci(s["auto_passed"], s["auto"]) if s["auto"] else "-")
            + (
                f"; one call on the same cases {100 * s['one_call_accuracy_same_cases']:.0f}%"
                if s.get("one_call_accuracy_same_cases") is not None
                else ""
            )
            + f"; bar met: {s['bar_met']}"
        )
        w = cal["as_written"]
        written = "-" if w["auto_accuracy"] is None else f"{100 * w['auto_accuracy']:.0f}%"
        print(
            f"  as written (min {w['min']:g}, in-sample): auto share {100 * w['auto_share']:.0f}%, accuracy {written}"
        )


def spread(cases: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """`limit` cases spread evenly over the evalset (its lines are grouped by label)."""
    if not limit or limit >= len(cases):
        return cases
    return [cases[(i * len(cases)) // limit] for i in range(limit)]


# -- main -----------------------------------------------------------------------------------


def start_server(model: str, log_dir: Path) -> Any:
    from tests.support import model_servers  # the tests' fetch-and-start helper, as stress.py reuses

    if model != "smollm2":
        raise SystemExit(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    return model_servers.start_smollm2_server(log_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--limit", type=int, default=None, help="N cases of each task, spread over its evalset")
    parser.add_argument("--model", default="smollm2", choices=MODELS)
    parser.add_argument("--url", default=None, help="a running OpenAI-compatible server (…/v1) serving the model")
    parser.add_argument("--target-auto-accuracy", type=float, default=0.95)
    parser.add_argument(
        "--grammar",
        default="gbnf",
        choices=["gbnf", "json_schema"],
        help="grammar mode of the pack and one-call arms (default gbnf: llama-server's compact grammar)",
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=0,
        help="pin each run to one of this many llama-server slots (the endpoint's slots=; 0: let the server pick)",
    )
    parser.add_argument(
        "--prefill",
        choices=["true", "false"],
        default="true",
        help="with --grammar gbnf: the endpoint's prefill= (the answer's opening written ahead of the model; "
        "both grammar arms, one call too)",
    )
    parser.add_argument(
        "--shots",
        type=int,
        default=None,
        help="few-shot examples of the one-call arms (default: the most any node of the pack takes)",
    )
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON too")
    parser.add_argument(
        "--rows", metavar="FILE", default=str(RESULTS), help=f"where the raw rows go (default {RESULTS.name})"
    )
    parser.add_argument("--from-rows", metavar="FILE", help="re-summarise a raw-rows file; no model is called")
    parser.add_argument(
        "--at",
        type=float,
        action="append",
        default=[],
        metavar="T",
        help="with --from-rows: the measurement half's auto tier at threshold T too (repeatable), "
        "to compare runs at the same threshold",
    )
    args = parser.parse_args(argv)
    if args.from_rows:
        return resummarise(Path(args.from_rows), args.target_auto_accuracy, args.at)
    tasks = [t for t in args.tasks.split(",") if t]
    arms = [a for a in args.arms.split(",") if a]
    for name in tasks:
        if name not in TASKS:
            parser.error(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    for arm in arms:
        if arm not in ARMS:
            parser.error(f"unknown arm {arm!r}; known: {', '.join(ARMS)}")

    log_dir = Path(tempfile.mkdtemp(prefix="real-models-server-"))

    @contextmanager
    def backend(grammar: bool) -> Iterator[Backend]:
        """A backend on the model server. Without --url each arm gets a freshly started
        llama-server, so that no arm reads another arm's prompts from the server's cache."""
        # Each server logs to a folder of its own: the arms' servers run at the same time.
        server = None if args.url else start_server(args.model, Path(tempfile.mkdtemp(dir=log_dir)))
        url = args.url if server is None else server.base_url
        options = f"concurrency={CONCURRENCY};slots={args.slots};grammar=" + (args.grammar if grammar else "none")
        if grammar and args.grammar == "gbnf":
            options += f";prefill={args.prefill}"
        opened = open_backend(f"openai:{url}#{args.model};{options}")
        try:
            yield opened
        finally:
            opened.close()
            if server is not None:
                server.stop()

    rows_out: list[dict[str, Any]] = []
    summaries = []
    started = time.monotonic()
    try:
        for name in tasks:
            task = load_task(name)
            if args.shots is not None:
                if args.shots < 0:
                    parser.error("--shots: a count of 0 or more")
                task.shots = args.shots
            cases = spread(task.cases, args.limit)
            arm_rows: dict[str, list[Row]] = {arm: [] for arm in arms}
            skipped: dict[str, str] = {}
            with ExitStack() as servers:
                # Every model arm has its own server, started at once; the arms take turns
                # a block of cases at a time, so a machine that slows down or speeds up
                # during the task weighs on every arm alike (the seconds ratios).
                models = {
                    arm: servers.enter_context(backend(arm != "no_grammar")) for arm in arms if arm not in NO_MODEL_ARMS
                }
                blocks = [cases[i : i + BLOCK] for i in range(0, len(cases), BLOCK)]
                for n, block in enumerate(blocks):
                    turn = arms[n % len(arms) :] + arms[: n % len(arms)]  # who goes first rotates
                    for arm in turn:
                        if arm in skipped:
                            continue
                        if arm in ("pack", "written"):
                            rows, why = run_pack_arm(task, block, models[arm], opened=arm == "pack")
                            if why is not None:
                                skipped[arm] = why
                                continue
                        elif arm == "baseline":
                            rows = run_baseline(task, block)
                        elif arm == "nearest":
                            rows = run_nearest(task, block)
                        else:
                            rows = run_one_call(task, block, models[arm], grammar=arm == "one_call")
                        arm_rows[arm].extend(rows)
            for arm in skipped:
                arm_rows.pop(arm)
            summary = summarise(task, arm_rows, args.target_auto_accuracy)
            summary["model"] = args.model
            summary["skipped"] = skipped
            summaries.append(summary)
            print_table(task, summary, arm_rows, skipped)
            rows_out.extend(
                {
                    **r.to_dict(),
                    "model": args.model,
                    "grammar": args.grammar if r.arm in GRAMMAR_ARMS else None,
                    "slots": args.slots,
                    "prefill": args.prefill == "true" and args.grammar == "gbnf" and r.arm in GRAMMAR_ARMS,
                    **({"shots": task.shots} if r.arm in ("one_call", "no_grammar") else {}),
                }
                for rows in arm_rows.values()
                for r in rows
            )
            rows_out.append({"summary": summary})
    except BaseException:
        print(f"server logs kept in {log_dir}", file=sys.stderr)
        raise
    shutil.rmtree(log_dir, ignore_errors=True)
    print(f"\n{time.monotonic() - started:.0f}s; raw rows in {args.rows}")
    write_rows(Path(args.rows), rows_out)
    if args.json:
        print(json.dumps(summaries, indent=2))
    return 0


def resummarise(path: Path, target: float, at: list[float] | None = None) -> int:
    """Print the tables again from a raw-rows file (as written by a run), no model; with
    `at`, the measurement half's auto tier at each of those thresholds too."""
    by_task: dict[str, dict[str, list[Row]]] = {}
    declared: dict[str, float] = {}  # the gates' floor the run was made with (the pack may have changed since)
    for line in path.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        if "summary" in raw:
            written = ((raw["summary"].get("calibration") or {}).get("as_written")) or {}
            if "min" in written:
                declared[raw["summary"]["task"]] = float(written["min"])
            continue
        row = Row.from_dict(raw)
        by_task.setdefault(row.task, {}).setdefault(row.arm, []).append(row)
    for name, arm_rows in by_task.items():
        task = load_task(name)
        print_table(task, summarise(task, arm_rows, target, declared.get(name)), arm_rows, {})
        measure = arm_rows.get("pack", [])[1::2]
        ids = {r.case for r in measure}
        one = [r for r in arm_rows.get("one_call", []) if r.case in ids]
        for threshold in at or []:
            m = _measured(threshold, measure, one, arm_rows.get("baseline", []))
            same = m["one_call_accuracy_same_cases"]
            print(
                f"  auto tier at threshold {threshold:g} (measurement half): {m['auto']} of {len(measure)} cases, "
                f"{m['auto_passed']} right"
                + (f"; one call on the same cases {100 * same:.0f}%" if same is not None else "")
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
