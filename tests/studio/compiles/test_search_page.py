"""A compile's page shows what the loop's search on the target wrote in the work dir:
the split (split.json), the trials and their learning curve (search/trials.jsonl), the
verdict and the cost (verdict.json). Files missing, half written, malformed or too large
show as "not yet" or say why, never a 500; model-written text is escaped."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.compiles import search, worker
from studio.compiles.models import Compile
from studio.compiles.shared import cache_dir, work_dir
from studio.compiles.start import start_compile
from studio.compiles.views import progress_context
from studio.projects.models import Project
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn
from tests.support.studio import HTMX

SCRIPT = "<script>alert(1)</script>"


def setting(shots: int, strategy: str = "nearest", prompt: str = "plan") -> dict[str, Any]:
    return {"classify": {"shots": shots, "strategy": strategy, "prompt": prompt}}


def trial(n: int, arm: str, coordinate: str, passed: int, *, kept: bool, calls: int = 10, **extra: Any) -> dict:
    return {
        "trial": n,
        "arm": arm,
        "coordinate": coordinate,
        "setting": setting(n % 4),
        "cases": 10,
        "passed": passed,
        "score": passed / 10,
        "calls": calls,
        "calls_total": calls * n,
        "kept": kept,
        **extra,
    }


def arm(val: int, test: int, *, tokens: float | None, calls: float | None) -> dict[str, Any]:
    return {
        "validation": {"passed": val, "total": 10, "accuracy": val / 10},
        "test": {
            "passed": test,
            "total": 20,
            "accuracy": test / 20,
            "ci": [round(test / 20 - 0.2, 4), round(min(test / 20 + 0.1, 1.0), 4)],
            "fields": {"priority": {"accuracy": test / 20, "ci": [0.5, 0.95]}},
        },
        "tokens_per_case": tokens,
        "calls_per_case": calls,
    }


SPLIT = {
    "method": "seeded",
    "seed": 7,
    "train": [f"st-{i:02d}" for i in range(12)],
    "validation": [f"st-{i:02d}" for i in range(12, 22)],
    "test": [f"st-{i:02d}" for i in range(22, 42)],
    "unseen_labels": {"priority": ["p0", "p4"]},
}
TRIALS = [
    trial(1, "pack", "start", 6, kept=True),
    trial(2, "pack", "classify.fewshot", 8, kept=True),
    trial(3, "pack", "classify.prompt", 7, kept=False),
    trial(4, "one_call", "start", 5, kept=True),
]
VERDICT = {
    "target": "openai:gpt-small",
    "judged": True,
    "exit_code": 0,
    "sentence": "The pack won: 17 of 20 test cases against one call's 12 (p = 0.031).",
    "chosen": "pack",
    "split": {"train": 12, "validation": 10, "test": 20, "method": "seeded"},
    "arms": {
        "pack": arm(8, 17, tokens=812.5, calls=2.0),
        "one_call": arm(5, 12, tokens=640.0, calls=1.0),
        "baseline": arm(3, 6, tokens=None, calls=None),
    },
    "mcnemar": {"fixed": 7, "broken": 2, "p": 0.0312},
    "auto": {
        "threshold": 0.8,
        "reason": "the lowest threshold whose validation lower bound clears 90%",
        "validation": {"cases": 9, "accuracy": 1.0, "lower_bound": 0.7},
        "test": {"cases": 16, "share": 0.8, "accuracy": 0.9375, "one_call_accuracy": 0.625},
    },
    "cost": {"target_calls": 1234, "cached_calls": 56, "tokens": 987654},
    "context": {"limit": 8192, "max_prompt_tokens": 3100, "truncated_cases": 0},
}


def write(c: Compile, *, split: Any = SPLIT, trials: Any = TRIALS, verdict: Any = VERDICT) -> Path:
    """The three files in the compile's work dir; a str is written as it is, None not at all."""
    work = work_dir(c.pk)
    (work / "search").mkdir(parents=True, exist_ok=True)
    for name, value in (("split.json", split), ("verdict.json", verdict)):
        if value is not None:
            (work / name).write_text(value if isinstance(value, str) else json.dumps(value))
    if trials is not None:
        text = trials if isinstance(trials, str) else "".join(json.dumps(t) + "\n" for t in trials)
        (work / "search" / "trials.jsonl").write_text(text)
    return work


@pytest.fixture
def compile_row(project: Project, owner: User) -> Compile:
    return Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="done")


def page(client: Client, c: Compile, **kwargs: Any) -> str:
    response = client.get(f"/p/triage/compiles/{c.pk}/", **kwargs)
    assert response.status_code in (200, 286)
    return response.content.decode()


def row(text: str, marker: str) -> str:
    """The table row that starts with `marker` (its opening tag's attribute)."""
    start = text.index(marker)
    return text[start : text.index("</tr>", start)]


# -- everything there ---------------------------------------------------------------------------


def test_it_shows_the_split_the_verdict_and_the_cost(as_viewer: Client, compile_row: Compile) -> None:
    write(compile_row)

    text = page(as_viewer, compile_row)

    split = text[text.index('id="search-split"') :]
    assert "seeded" in split and "(seed 7)" in split
    assert '<td class="num">12</td><td class="num">10</td><td class="num">20</td>' in split
    assert '<span class="mono">priority</span>: p0, p4' in text
    assert "The pack won: 17 of 20 test cases against one call&#x27;s 12 (p = 0.031)." in text
    assert "passed the gate" in text and "did not pass the gate" not in text
    pack = row(text, 'data-arm="pack"')
    assert ">chosen<" in pack and "80.0% (8 of 10)" in pack and "85.0% (17 of 20)" in pack
    assert "65.0% – 95.0%" in pack and "812.5" in pack and "2.0" in pack and "0.0312" in pack
    one_call = row(text, 'data-arm="one_call"')
    assert "one call" in one_call and "60.0% (12 of 20)" in one_call and ">chosen<" not in one_call
    baseline = row(text, 'data-arm="baseline"')
    assert "trivial baseline" in baseline and "30.0% (6 of 20)" in baseline and "—" in baseline
    auto = row(text, 'id="verdict-auto"')
    assert "threshold 0.8" in auto and "100.0% on 9 cases; lower bound 70.0%" in auto
    assert "93.8% on 80.0% of test (16 cases); one call on them: 62.5%" in auto
    assert "right where one call was wrong on 7, wrong where it was right on 2; p = 0.0312" in text
    assert '<td class="mono">priority</td><td class="num">85.0% (50.0% – 95.0%)</td>' in text
    cost = text[text.index('id="search-cost"') :]
    assert '<td class="num">1,234</td><td class="num">56</td><td class="num">987,654</td>' in cost
    assert '<td class="num">8,192</td><td class="num">3,100</td><td class="num">0</td>' in cost


def test_it_shows_the_trials_and_their_learning_curve(as_viewer: Client, compile_row: Compile) -> None:
    write(compile_row)

    text = page(as_viewer, compile_row)

    second = row(text, 'data-trial="2"')
    assert "classify.fewshot" in second and "classify: 2 shots (nearest), plan prompt" in second
    assert "80.0%" in second and "(8 of 10)" in second and "(20 in all)" in second and ">kept<" in second
    assert ">kept<" not in row(text, 'data-trial="3"')
    assert "one call" in row(text, 'data-trial="4"')
    assert "4 trials." in text
    curve = text[text.index('id="search-curve"') : text.index("</svg>", text.index('id="search-curve"'))]
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart"' in curve
    assert "<title>Validation score per trial, trials 1 to 4</title>" in curve
    assert "trial 2 (pack, classify.fewshot): 80.0%, 8 of 10 validation cases, 10 target calls, kept" in curve
    assert curve.count("<polyline") == 2  # pack's trials, and pack's kept trials (one call: one point each)
    assert "pack: kept" in curve and "one call" in curve
    assert "trial (first → last)" in curve and "pack version" not in curve


def test_the_poller_refreshes_the_search_while_the_compile_runs(
    as_owner: Client, project: Project, owner: User
) -> None:
    running = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="running")
    write(running, verdict=None, trials=TRIALS[:2])

    fragment = page(as_owner, running, headers=HTMX)

    assert fragment.lstrip().startswith('<div id="compile-progress"') and 'hx-trigger="every 1s"' in fragment
    assert 'id="compile-search"' in fragment and 'data-trial="2"' in fragment and 'id="search-curve"' in fragment
    assert 'id="verdict-none">Not yet.' in fragment
    assert "20 target calls so far" in fragment


def test_the_search_adds_no_query_however_many_trials(
    as_viewer: Client, compile_row: Compile, django_assert_num_queries: Any
) -> None:
    page(as_viewer, compile_row)  # warm: the session and the user
    with CaptureQueriesContext(connection) as without:
        page(as_viewer, compile_row)
    write(compile_row, trials=[trial(n, "pack", "classify.fewshot", n % 10, kept=False) for n in range(1, 300)])

    with django_assert_num_queries(len(without.captured_queries)):
        text = page(as_viewer, compile_row)

    assert 'data-trial="299"' in text


# -- missing, partial, malformed ---------------------------------------------------------------


def test_it_says_not_yet_while_nothing_is_written(as_owner: Client, project: Project, owner: User) -> None:
    running = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="running")

    text = page(as_owner, running)

    for part in ("search-split-none", "verdict-none", "search-trials-none"):
        assert f'id="{part}">Not yet.' in text
    assert 'id="search-curve"' not in text


def test_a_finished_compile_without_a_search_says_so_once(as_viewer: Client, compile_row: Compile) -> None:
    text = page(as_viewer, compile_row)

    assert 'id="search-none"' in text and "Not yet." not in text


@pytest.mark.parametrize(
    ("split", "trials", "verdict"),
    [
        ("{not json", "{\n", '{"sentence": '),
        ("[1, 2]", "[]\n42\n", "null"),
        ('{"train": 3, "validation": "x", "unseen_labels": [1]}', '{"trial": "one"}\n', '{"arms": [], "split": 5}'),
    ],
)
def test_it_shows_malformed_files_without_breaking(
    as_viewer: Client, compile_row: Compile, split: str, trials: str, verdict: str
) -> None:
    write(compile_row, split=split, trials=trials, verdict=verdict)

    text = page(as_viewer, compile_row)

    assert 'id="compile-search"' in text and 'id="search-curve"' not in text
    assert ("split.json cannot be shown" in text) or ('id="search-split"' in text)
    assert ("verdict.json cannot be shown" in text) or ('id="verdict-sentence"' in text)
    assert "trials.jsonl cannot be shown" in text or "No line of trials.jsonl could be read" in text


def test_it_coerces_wrong_types_inside_well_formed_files(as_viewer: Client, compile_row: Compile) -> None:
    arms = {
        "pack": {"validation": "all", "test": {"ci": [None, 1], "fields": {"f": 3}}, "tokens_per_case": "many"},
        "one_call": None,
        "baseline": [],
    }
    bad = {"exit_code": "0", "judged": "yes", "sentence": 42, "arms": arms, "mcnemar": [], "auto": {"test": 1}}
    trials = [{"trial": 1, "arm": 3, "setting": {"classify": "x"}, "score": float("nan"), "kept": "yes"}]
    write(compile_row, verdict=bad, trials=trials)

    text = page(as_viewer, compile_row)

    assert "(no sentence)" in text and "passed the gate" not in text and "not judged on a model" in text
    assert 'data-arm="pack"' in text and 'data-arm="one_call"' not in text
    assert "verdict-mcnemar" not in text and 'id="verdict-auto"' in text
    first = row(text, 'data-trial="1"')
    assert "classify: —" in first and ">kept<" not in first and "—" in first


def test_it_skips_a_line_still_being_written_and_counts_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(TRIALS[0]) + "\nnot json\n" + json.dumps(TRIALS[1]) + '\n{"trial": 3, "ar')

    trials, skipped, problem = search.read_trials(path)

    assert [t.trial for t in trials] == [1, 2] and skipped == 1 and problem == ""


def test_it_reads_only_the_tail_of_a_long_trials_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_viewer: Client, compile_row: Compile
) -> None:
    monkeypatch.setattr(search, "TRIALS_SHOWN", 50)
    monkeypatch.setattr(search, "FILE_BYTES", 40_000)
    write(compile_row, trials=[trial(n, "pack", "classify.fewshot", n % 10, kept=n % 7 == 0) for n in range(1, 1001)])

    text = page(as_viewer, compile_row)

    assert 'data-trial="1000"' in text and 'data-trial="951"' in text and 'data-trial="950"' not in text
    assert "The last 50 trials (951 to 1000)." in text


def test_it_refuses_a_file_too_large_to_read(
    monkeypatch: pytest.MonkeyPatch, as_viewer: Client, compile_row: Compile
) -> None:
    monkeypatch.setattr(search, "FILE_BYTES", 100)
    write(compile_row, verdict={**VERDICT, "sentence": "x" * 200})

    text = page(as_viewer, compile_row)

    assert "verdict.json cannot be shown: it is larger than" in text and 'id="verdict-sentence"' not in text


def test_it_shows_a_verdict_judged_on_no_model(as_viewer: Client, compile_row: Compile) -> None:
    none = {"target": None, "judged": False, "exit_code": 1, "sentence": "Nothing was judged on a model.", "arms": {}}
    write(compile_row, verdict=none, trials=None)

    text = page(as_viewer, compile_row)

    assert "Nothing was judged on a model." in text and "did not pass the gate" in text
    assert "not judged on a model" in text and 'id="verdict-arms"' not in text
    assert 'id="search-trials-none">None written.' in text  # ended: nothing more is coming


def test_it_says_train_lacks_no_label_only_when_the_split_says_so(as_viewer: Client, compile_row: Compile) -> None:
    write(compile_row, split={**SPLIT, "unseen_labels": {}})
    assert "Train shows every label validation and test do." in page(as_viewer, compile_row)

    write(compile_row, split={k: v for k, v in SPLIT.items() if k != "unseen_labels"})
    text = page(as_viewer, compile_row)
    assert "Train shows every label" not in text and 'id="search-unseen"' not in text


# -- escaping ------------------------------------------------------------------------------------


def test_it_escapes_what_the_model_and_the_compiler_wrote(as_viewer: Client, compile_row: Compile) -> None:
    verdict = json.loads(json.dumps(VERDICT))
    verdict.update(sentence=f"The pack won {SCRIPT}", target=SCRIPT)
    verdict["auto"]["reason"] = SCRIPT
    verdict["arms"]["pack"]["test"]["fields"] = {SCRIPT: {"accuracy": 0.5, "ci": [0.1, 0.9]}}
    split = {**SPLIT, "method": SCRIPT, "unseen_labels": {SCRIPT: [SCRIPT]}}
    hostile = trial(1, SCRIPT, SCRIPT, 5, kept=True)
    hostile["setting"] = {SCRIPT: {"shots": 1, "strategy": SCRIPT, "prompt": SCRIPT}}
    write(compile_row, split=split, verdict=verdict, trials=[hostile])

    text = page(as_viewer, compile_row)

    assert "<script>" not in text
    assert "The pack won &lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert text.count("&lt;script&gt;") >= 8
    curve = text[text.index('id="search-curve"') :]
    assert "trial 1 (&lt;script&gt;alert(1)&lt;/script&gt;, &lt;script&gt;" in curve


# -- the cache -----------------------------------------------------------------------------------


def test_each_project_has_its_own_cache_beside_the_work_dirs(project: Project, compile_row: Compile) -> None:
    cache = cache_dir(project)

    assert cache.parent == work_dir(compile_row.pk).parent / "cache" and cache.name == f"project-{project.pk}"
    assert not cache.exists()  # made by the loop when it writes, not by asking where it is
    assert progress_context(compile_row, can_edit=False)["search"].anything is False


def test_the_worker_hands_the_loop_the_projects_cache_on_every_compile(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    for _ in range(2):
        c = start_compile(project, user=owner)
        assert worker.run_compile(c.pk) == "done"

    assert [call["cache"] for call in fake.calls] == [cache_dir(project)] * 2
    assert fake.calls[0]["work"] != fake.calls[1]["work"]  # two work dirs, one cache


def test_a_setting_says_which_search_coordinates_are_on() -> None:
    text = search.setting_text(
        {
            "route": {
                "shots": 3,
                "strategy": "bootstrap",
                "prompt": "proposal-0123456789",
                "hierarchy": True,
                "matched": True,
            },
            "check": {
                "shots": 0,
                "strategy": "nearest",
                "prompt": "names",
                "prior": True,
                "draws": 3,
                "two_stage": True,
            },
        }
    )
    assert text == (
        "route: 3 shots (bootstrap), proposal-0123456789 prompt, keyed choices, examples of the parent's value; "
        "check: 0 shots (nearest), names prompt, label prior divided out, 3 draws, reasons first"
    )
