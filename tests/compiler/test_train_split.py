"""The train split: spec.yaml's `train: TAG` marks the gold cases few-shot examples may
come from. Emit writes them as examples and the manifest's `train_tag`; the runtime then
lets those (and only those) evalset cases be examples, and the eval report gives the
held-out score (the cases without the tag) beside the overall one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from compiler import SpecInvalid, induce, load_spec, parse_plan
from compiler.emit import emit
from runtime import PackInvalid, evaluate, load_pack, open_backend
from runtime.report import format_report

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ("st-01", "st-02", "st-03", "st-04", "st-05")


def split_spec(root: Path, train: str | None = "train", tagged: tuple[str, ...] = TRAIN) -> Path:
    """specs/support_triage with `train:` set and the `tagged` cases carrying the tag."""
    shutil.copytree(ROOT / "specs/support_triage", root)
    doc = yaml.safe_load((root / "spec.yaml").read_text())
    if train is not None:
        doc["train"] = train
    (root / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    lines = []
    for line in (root / "gold.jsonl").read_text().splitlines():
        case = json.loads(line)
        if case["id"] in tagged:
            case["tags"] = [*case.get("tags", []), "train"]
        lines.append(json.dumps(case) + "\n")
    (root / "gold.jsonl").write_text("".join(lines))
    return root


def emit_split(tmp_path: Path) -> Path:
    spec = load_spec(split_spec(tmp_path / "spec"))
    plan = parse_plan(json.loads((ROOT / "specs/support_triage/plans/1.json").read_text()), spec)
    script = json.loads((ROOT / "packs/support_triage/fakes/scripted.json").read_text())
    return emit(
        plan,
        spec,
        tmp_path / "pack",
        induction=induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs)),
        fakes={"scripted.json": script},
        model="fake:fakes/scripted.json",
    )


def test_it_checks_that_every_case_id_used_here_exists() -> None:
    ids = [json.loads(line)["id"] for line in (ROOT / "specs/support_triage/gold.jsonl").read_text().splitlines()]
    assert set(TRAIN) <= set(ids)


def test_it_reads_the_train_tag_from_the_spec(tmp_path: Path) -> None:
    assert load_spec(split_spec(tmp_path / "spec")).train == "train"
    assert load_spec(ROOT / "specs/support_triage").train is None


@pytest.mark.parametrize(
    ("train", "tagged", "expected"),
    [
        ("practice", TRAIN, "'train': no gold case has the tag 'practice'"),
        ("train", (), "'train': no gold case has the tag 'train'"),
        ("train", None, "'train': every gold case has the tag 'train'"),
        ("", TRAIN, "'train' names the tag"),
    ],
)
def test_it_refuses_a_train_split_that_is_empty_or_everything(
    tmp_path: Path, train: str, tagged: tuple[str, ...] | None, expected: str
) -> None:
    if tagged is None:
        ids = [json.loads(x)["id"] for x in (ROOT / "specs/support_triage/gold.jsonl").read_text().splitlines()]
        tagged = tuple(ids)
    with pytest.raises(SpecInvalid) as info:
        load_spec(split_spec(tmp_path / "spec", train, tagged))
    assert any(expected in str(issue) and "spec.yaml" in str(issue) for issue in info.value.issues), info.value


def test_it_emits_the_train_cases_as_examples(tmp_path: Path) -> None:
    out = emit_split(tmp_path)
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    assert manifest["train_tag"] == "train"
    graph = yaml.safe_load((out / "graph.yaml").read_text())
    assert graph["nodes"]["classify"]["examples"] == {
        "file": "examples/classify.jsonl",
        "count": 3,
        "strategy": "nearest",
    }
    lines = [json.loads(x) for x in (out / "examples/classify.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == list(TRAIN)
    pack = load_pack(out)
    assert pack.train_tag == "train"
    assert pack.nodes["classify"].examples is not None
    assert (out / "evalset.jsonl").read_bytes() == (tmp_path / "spec/gold.jsonl").read_bytes()


def test_it_reports_the_held_out_score_beside_the_overall_one(tmp_path: Path) -> None:
    pack = load_pack(emit_split(tmp_path))
    assert pack.model is not None
    report = evaluate(pack, open_backend(pack.model, base_dir=pack.root, default=pack.model), concurrency=1)
    held = report.held_out()
    assert held == (report.total - len(TRAIN), report.total - len(TRAIN))
    assert report.passed == report.total
    first = format_report(report).splitlines()[0]
    assert first.endswith(
        f"cases passed (model fake:fakes/scripted.json); held out (not tagged 'train'): {held[0]}/{held[1]}"
    )
    doc = report.to_dict()
    assert doc["train_tag"] == "train"
    assert doc["held_out"] == {"passed": held[0], "total": held[1]}


def test_it_still_refuses_examples_from_the_evalset_without_the_train_tag(tmp_path: Path) -> None:
    out = emit_split(tmp_path)
    text = (out / "manifest.yaml").read_text()
    (out / "manifest.yaml").write_text(text.replace("train_tag: train\n", ""))
    with pytest.raises(PackInvalid, match="few-shot examples must not come from the evalset"):
        load_pack(out)
    # with the tag named but an example equal to a case outside the split: refused too
    (out / "manifest.yaml").write_text(text)
    gold = (out / "evalset.jsonl").read_text().splitlines()
    extra = json.loads(gold[-1])  # a held-out case
    with (out / "examples/classify.jsonl").open("a") as f:
        f.write(json.dumps({"id": "x-1", "input": extra["input"], "expected": extra["expected"]}) + "\n")
    with pytest.raises(PackInvalid, match=f"same input as evalset case '{extra['id']}'"):
        load_pack(out)


def test_it_gives_no_train_tag_and_no_examples_without_a_split(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "specs/support_triage")
    plan = parse_plan(json.loads((ROOT / "specs/support_triage/plans/1.json").read_text()), spec)
    out = emit(plan, spec, tmp_path / "pack", induction=induce([(c.input, c.expected) for c in spec.gold]))
    assert "train_tag" not in yaml.safe_load((out / "manifest.yaml").read_text())
    assert not (out / "examples").exists()
    report = evaluate(load_pack(out), open_backend(f"fake:{ROOT / 'packs/support_triage/fakes/scripted.json'}"))
    assert report.held_out() is None
    assert "held_out" not in report.to_dict()
