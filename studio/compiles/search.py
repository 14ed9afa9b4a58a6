"""What a compile's search on its target model leaves in its work dir, read for the
compile's page (compiler.loop.build writes them, docs/compiler.md):

- `split.json`: how the gold cases were split (train / validation / test), and the labels
  validation or test show that train never does;
- `search/trials.jsonl`: one line per trial of the per-node settings search, in order
  (arm, coordinate, setting, validation score, target calls, kept);
- `verdict.json`: the arms (pack, one call, trivial baseline) on validation and test,
  McNemar, the auto tier, the cost, and one sentence saying which won and why.

The files are the compiler's, read while it may still be writing them: every read is
bounded (a file over FILE_BYTES is not parsed; of the trials file only its last
FILE_BYTES and, of those, the last TRIALS_SHOWN trials), and every value is checked for
its type before the page sees it. A file that is missing shows as "not yet"; one that is
half written, too large or not what the contract says shows why, never a 500. All text
here reaches the page through Django's autoescape; the one thing marked safe is the
chart, which escapes its own text (studio.charts)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from studio import charts
from studio.numbers import pct

FILE_BYTES = 2 * 1024 * 1024  # the most of one file read for the page
TRIALS_SHOWN = 500  # the last trials shown (table and curve)
TEXT_CHARS = 1000  # a sentence or reason, cut
NAME_CHARS = 120  # a field, node, label or coordinate name, cut
FIELDS_SHOWN = 50  # per-field rows; unseen-label fields
LABELS_SHOWN = 50  # unseen labels per field
NODES_SHOWN = 20  # nodes of one trial's setting
ARMS = (("pack", "pack"), ("one_call", "one call"), ("baseline", "trivial baseline"), ("nearest", "nearest case"))
# line_plot's x caption, written for the eval history's versions; the curve's x is trials.
EVAL_X_CAPTION = "pack version (oldest → newest)"
TRIALS_X_CAPTION = "trial (first → last)"


# -- reading ------------------------------------------------------------------------------


def read_object(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object in `path`, ""); (None, "") when there is no such file; (None, why)
    when there is one that cannot be shown."""
    try:
        if not path.exists():
            return None, ""
        if not path.is_file():
            return None, "it is not a file"
        with path.open("rb") as f:
            data = f.read(FILE_BYTES + 1)
    except OSError:
        return None, "it could not be read"
    if len(data) > FILE_BYTES:
        return None, f"it is larger than {FILE_BYTES // (1024 * 1024)} MB"
    try:
        value = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None, "it is not valid JSON (it may still be being written)"
    if not isinstance(value, dict):
        return None, "it is not a JSON object"
    return value, ""


def tail_lines(path: Path) -> tuple[list[bytes], bool, str]:
    """The lines of the last FILE_BYTES of `path` (the first dropped when the read starts
    inside it; blank ones left out); whether the last has no newline yet (the writer may
    be between the two); the problem. ([], False, "") when there is no file."""
    try:
        if not path.exists():
            return [], False, ""
        if not path.is_file():
            return [], False, "it is not a file"
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - FILE_BYTES)
            f.seek(start)
            data = f.read(FILE_BYTES)
    except OSError:
        return [], False, "it could not be read"
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]
    open_end = not data.endswith(b"\n") and bool(lines) and bool(lines[-1].strip())
    return [line for line in lines if line.strip()], open_end, ""


# -- values, checked ------------------------------------------------------------------------


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _text(v: Any, limit: int = NAME_CHARS) -> str:
    if not isinstance(v, str):
        return ""
    return v if len(v) <= limit else v[: limit - 1] + "…"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _count(v: Any) -> int | None:
    """A split's part: a list of case ids, or a number of them."""
    return len(v) if isinstance(v, list) else _int(v)


def _interval(v: Any) -> str:
    if not isinstance(v, list) or len(v) != 2:
        return "—"
    lo, hi = _num(v[0]), _num(v[1])
    return "—" if lo is None or hi is None else f"{pct(lo)} – {pct(hi)}"


def _rate(v: Any) -> str:
    """`{"passed", "total", "accuracy"}` as "80.0% (8 of 10)"."""
    d = _dict(v)
    passed, total, accuracy = _int(d.get("passed")), _int(d.get("total")), _num(d.get("accuracy"))
    if accuracy is None and passed is not None and total:
        accuracy = passed / total
    if accuracy is None:
        return "—"
    return f"{pct(accuracy)} ({passed} of {total})" if passed is not None and total is not None else pct(accuracy)


def _per_case(v: Any) -> str:
    n = _num(v)
    return "—" if n is None else f"{n:,.1f}"


def _whole(v: Any) -> str:
    n = _int(v)
    return "—" if n is None else f"{n:,}"


# -- the split ------------------------------------------------------------------------------


@dataclass
class Split:
    method: str
    seed: int | None
    train: int | None
    validation: int | None
    test: int | None
    unseen: list[tuple[str, str]]  # field, its labels joined
    unseen_known: bool  # the file says which labels train lacks (none, or those in `unseen`)


def split_of(raw: dict[str, Any]) -> Split:
    unseen = []
    for name, labels in list(_dict(raw.get("unseen_labels")).items())[:FIELDS_SHOWN]:
        if isinstance(labels, list) and labels:
            shown = [_text(x) if isinstance(x, str) else json.dumps(x)[:NAME_CHARS] for x in labels[:LABELS_SHOWN]]
            more = f" and {len(labels) - LABELS_SHOWN} more" if len(labels) > LABELS_SHOWN else ""
            unseen.append((_text(name), ", ".join(shown) + more))
    return Split(
        method=_text(raw.get("method")) or "—",
        seed=_int(raw.get("seed")),
        train=_count(raw.get("train")),
        validation=_count(raw.get("validation")),
        test=_count(raw.get("test")),
        unseen=unseen,
        unseen_known=isinstance(raw.get("unseen_labels"), dict),
    )


# -- the trials -----------------------------------------------------------------------------


@dataclass
class Trial:
    trial: int
    arm: str
    coordinate: str
    setting: str
    cases: int | None
    passed: int | None
    score: float | None
    calls: int | None
    calls_total: int | None
    kept: bool

    @property
    def arm_name(self) -> str:
        return dict(ARMS).get(self.arm, self.arm)

    @property
    def score_text(self) -> str:
        return pct(self.score)


def setting_text(v: Any) -> str:
    """A trial's setting on one line: `classify: 4 shots nearest, plan prompt; route: ...`."""
    parts = []
    for node, raw in list(_dict(v).items())[:NODES_SHOWN]:
        s = _dict(raw)
        shots, strategy, prompt = _int(s.get("shots")), _text(s.get("strategy")), _text(s.get("prompt"))
        bits = []
        if shots is not None:
            bits.append(f"{shots} shot{'' if shots == 1 else 's'}" + (f" ({strategy})" if strategy else ""))
        elif strategy:
            bits.append(strategy)
        if prompt:
            bits.append(f"{prompt} prompt")
        if s.get("hierarchy") is True:
            bits.append("keyed choices")
        if s.get("matched") is True:
            bits.append("examples of the parent's value")
        if s.get("prior") is True:
            bits.append("label prior divided out")
        draws = _int(s.get("draws"))
        if draws is not None and draws > 1:
            bits.append(f"{draws} draws")
        if s.get("two_stage") is True:
            bits.append("reasons first")
        parts.append(f"{_text(node)}: {', '.join(bits) or '—'}")
    more = "; …" if len(_dict(v)) > NODES_SHOWN else ""
    return "; ".join(parts) + more


def trial_of(raw: Any) -> Trial | None:
    if not isinstance(raw, dict):
        return None
    number = _int(raw.get("trial"))
    if number is None or number < 1:
        return None
    cases, passed = _int(raw.get("cases")), _int(raw.get("passed"))
    score = _num(raw.get("score"))
    if score is None and cases and passed is not None:
        score = passed / cases
    return Trial(
        trial=number,
        arm=_text(raw.get("arm")) or "?",
        coordinate=_text(raw.get("coordinate")),
        setting=setting_text(raw.get("setting")),
        cases=cases,
        passed=passed,
        score=score,
        calls=_int(raw.get("calls")),
        calls_total=_int(raw.get("calls_total")),
        kept=raw.get("kept") is True,
    )


def read_trials(path: Path) -> tuple[list[Trial], int, str]:
    """The last TRIALS_SHOWN trials of `path`, in order; how many lines of those read could
    not be shown (the last line, without its newline yet, is not counted: it may still be
    being written); the problem."""
    lines, open_end, problem = tail_lines(path)
    trials: list[Trial] = []
    skipped = 0
    for i in range(len(lines) - 1, -1, -1):
        if len(trials) >= TRIALS_SHOWN:
            break
        try:
            trial = trial_of(json.loads(lines[i].decode("utf-8")))
        except (ValueError, RecursionError):
            trial = None
        if trial is not None:
            trials.append(trial)
        elif not (open_end and i == len(lines) - 1):
            skipped += 1
    trials.reverse()
    return trials, skipped, problem


def learning_curve(trials: list[Trial]) -> SafeString | None:
    """Validation score per trial (studio.charts.line_plot): one line per arm, and
    per arm its kept trials (the incumbent as it moved) as a line of their own."""
    scored = [(i, t) for i, t in enumerate(trials) if t.score is not None]
    if not scored:
        return None
    arms = list(dict.fromkeys(t.arm for _, t in scored))[:4]
    series: list[tuple[str, list[charts.Point]]] = []
    for kept in (False, True):
        for arm in arms:
            name = dict(ARMS).get(arm, arm)
            pts = [
                charts.Point(i, min(max(t.score or 0.0, 0.0), 1.0), _tip(t))
                for i, t in scored
                if t.arm == arm and (t.kept or not kept)
            ]
            if pts:
                series.append((f"{name}: kept" if kept else name, pts))
    svg = charts.line_plot(
        [str(t.trial) for t in trials],
        series,
        label=f"Validation score per trial, trials {trials[0].trial} to {trials[-1].trial}",
        y_label="validation score",
        fmt=lambda v: f"{100 * v:.0f}%",
        y_max=1.0,
    )
    # Both captions are constants: the chart stays as escaped as line_plot made it.
    return mark_safe(str(svg).replace(str(escape(EVAL_X_CAPTION)), str(escape(TRIALS_X_CAPTION))))


def _tip(t: Trial) -> str:
    where = f"{t.arm_name}, {t.coordinate}" if t.coordinate else t.arm_name
    tip = f"trial {t.trial} ({where}): {t.score_text}"
    if t.passed is not None and t.cases is not None:
        tip += f", {t.passed} of {t.cases} validation cases"
    if t.calls is not None:
        tip += f", {t.calls} target call{'' if t.calls == 1 else 's'}"
    return tip + (", kept" if t.kept else "")


# -- the verdict ----------------------------------------------------------------------------


@dataclass
class Arm:
    key: str
    name: str
    chosen: bool
    validation: str
    test: str
    ci: str
    tokens_per_case: str
    calls_per_case: str
    fields: dict[str, str]


@dataclass
class Verdict:
    target: str
    judged: bool
    passed_gate: bool | None  # exit code 0 / 1; None: neither
    sentence: str
    chosen: str
    split: str
    arms: list[Arm]
    fields: list[tuple[str, list[str]]]  # per output field: the test accuracy of each arm
    mcnemar: dict[str, str] | None
    auto: dict[str, str] | None
    cost: dict[str, str]
    context: dict[str, str]


def arm_of(key: str, name: str, raw: Any, chosen: str) -> Arm | None:
    if not isinstance(raw, dict):
        return None
    test = _dict(raw.get("test"))
    fields = {}
    for f, v in list(_dict(test.get("fields")).items())[:FIELDS_SHOWN]:
        d = _dict(v)
        fields[_text(f)] = f"{pct(_num(d.get('accuracy')))} ({_interval(d.get('ci'))})"
    return Arm(
        key=key,
        name=name,
        chosen=key == chosen,
        validation=_rate(raw.get("validation")),
        test=_rate(test),
        ci=_interval(test.get("ci")),
        tokens_per_case=_per_case(raw.get("tokens_per_case")),
        calls_per_case=_per_case(raw.get("calls_per_case")),
        fields=fields,
    )


def verdict_of(raw: dict[str, Any]) -> Verdict:
    chosen = _text(raw.get("chosen"))
    arms = [a for key, name in ARMS if (a := arm_of(key, name, _dict(raw.get("arms")).get(key), chosen))]
    names = list(dict.fromkeys(f for a in arms for f in a.fields))[:FIELDS_SHOWN]
    split = _dict(raw.get("split"))
    counts = [f"{_whole(split.get(k))} {k}" for k in ("train", "validation", "test") if k in split]
    exit_code = _int(raw.get("exit_code"))
    return Verdict(
        target=_text(raw.get("target"), TEXT_CHARS),
        judged=raw.get("judged") is True,
        passed_gate=None if exit_code not in (0, 1) else exit_code == 0,
        sentence=_text(raw.get("sentence"), TEXT_CHARS),
        chosen=dict(ARMS).get(chosen, chosen),
        split=", ".join(counts) + (f" ({_text(split.get('method'))})" if _text(split.get("method")) else ""),
        arms=arms,
        fields=[(f, [a.fields.get(f, "—") for a in arms]) for f in names],
        mcnemar=_mcnemar(raw.get("mcnemar")),
        auto=_auto(raw.get("auto")),
        cost={k: _whole(_dict(raw.get("cost")).get(k)) for k in ("target_calls", "cached_calls", "tokens")},
        context={
            k: _whole(_dict(raw.get("context")).get(k)) for k in ("limit", "max_prompt_tokens", "truncated_cases")
        },
    )


def _mcnemar(v: Any) -> dict[str, str] | None:
    if not isinstance(v, dict):
        return None
    p = _num(v.get("p"))
    return {"fixed": _whole(v.get("fixed")), "broken": _whole(v.get("broken")), "p": "—" if p is None else f"{p:.3g}"}


def _auto(v: Any) -> dict[str, str] | None:
    if not isinstance(v, dict):
        return None
    val, test = _dict(v.get("validation")), _dict(v.get("test"))
    threshold = _num(v.get("threshold"))
    return {
        "threshold": "none" if threshold is None else f"{threshold:.3g}",
        "reason": _text(v.get("reason"), TEXT_CHARS),
        "validation_cases": _whole(val.get("cases")),
        "validation_accuracy": pct(_num(val.get("accuracy"))),
        "lower_bound": pct(_num(val.get("lower_bound"))),
        "test_cases": _whole(test.get("cases")),
        "test_share": pct(_num(test.get("share"))),
        "test_accuracy": pct(_num(test.get("accuracy"))),
        "one_call_accuracy": pct(_num(test.get("one_call_accuracy"))),
    }


# -- the page's part ------------------------------------------------------------------------


@dataclass
class Search:
    split: Split | None = None
    split_problem: str = ""
    trials: list[Trial] = field(default_factory=list)
    trials_skipped: int = 0
    trials_problem: str = ""
    trials_exist: bool = False
    curve: SafeString | None = None
    verdict: Verdict | None = None
    verdict_problem: str = ""

    @property
    def anything(self) -> bool:
        return bool(self.split or self.split_problem or self.trials_exist or self.verdict or self.verdict_problem)

    @property
    def calls_so_far(self) -> int | None:
        """The target calls the trials report (the verdict's cost, before there is one)."""
        return next((t.calls_total for t in reversed(self.trials) if t.calls_total is not None), None)

    @property
    def first_trial(self) -> int | None:
        return self.trials[0].trial if self.trials else None

    @property
    def last_trial(self) -> int | None:
        return self.trials[-1].trial if self.trials else None

    @property
    def trials_clipped(self) -> bool:
        return bool(self.trials) and self.trials[0].trial > 1


def read_search(work: Path) -> Search:
    """The split, the trials and the verdict in the compile's work dir, as far as there are."""
    out = Search()
    raw, out.split_problem = read_object(work / "split.json")
    out.split = split_of(raw) if raw is not None else None
    trials_path = work / "search" / "trials.jsonl"
    out.trials, out.trials_skipped, out.trials_problem = read_trials(trials_path)
    out.trials_exist = bool(out.trials or out.trials_problem or out.trials_skipped or trials_path.exists())
    out.curve = learning_curve(out.trials)
    raw, out.verdict_problem = read_object(work / "verdict.json")
    out.verdict = verdict_of(raw) if raw is not None else None
    return out
