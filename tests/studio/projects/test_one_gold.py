"""One gold per project: the pack's evalset is what the compiler reads as the spec's gold,
so an evalset edit is what the next compile reads; an old project's spec/gold.jsonl is
folded into the evalset by `manage.py one_gold` with no case lost (cases that differ are
kept under a new id and reported), and a second run changes nothing."""

from __future__ import annotations

import io
import json

from django.core.management import call_command

from studio.projects.gold import merge_gold
from studio.projects.models import Project
from studio.projects.specs import spec_files
from studio.projects.storage import PackRepo

CASE_A = {"id": "a", "input": {"t": "x"}, "expected": {"l": "1"}}
CASE_B = {"id": "b", "input": {"t": "y"}, "expected": {"l": "2"}}


def lines(*cases: dict[str, object]) -> bytes:
    return "".join(json.dumps(c) + "\n" for c in cases).encode()


def test_merge_keeps_every_case_of_both() -> None:
    changed_a = {**CASE_A, "expected": {"l": "9"}}
    merged = merge_gold(lines(CASE_A), lines(changed_a, CASE_B, CASE_A))
    ids = [json.loads(line)["id"] for line in merged.data.decode().splitlines()]
    assert ids == ["a", "a-gold", "b"]
    assert merged.added == ["b"] and merged.renamed == {"a": "a-gold"}
    assert merge_gold(lines(CASE_A, CASE_B), lines(CASE_B, CASE_A)).data == lines(CASE_A, CASE_B)
    assert merge_gold(None, lines(CASE_A)).data == lines(CASE_A)
    odd = merge_gold(lines(CASE_A), b"not json\n")
    assert odd.unreadable == 1 and odd.data.decode().endswith("not json\n")


def test_an_evalset_edit_is_what_the_next_compile_reads(project: Project) -> None:
    repo = PackRepo(project.repo_path)
    repo.save({"spec/spec.yaml": b"name: triage\n"}, base=repo.head(), author="o", email="", message="spec")
    evalset = repo.files(prefix="pack/")["evalset.jsonl"]
    edited = evalset + lines(CASE_B)
    repo.save({"pack/evalset.jsonl": edited}, base=repo.head(), author="o", email="", message="one more case")
    assert spec_files(repo)["gold.jsonl"] == edited
    assert "gold.jsonl" not in repo.files(prefix="spec/")


def test_the_command_folds_an_old_projects_gold_and_reports_it(project: Project) -> None:
    repo = PackRepo(project.repo_path)
    evalset = repo.files(prefix="pack/")["evalset.jsonl"]
    first = json.loads(evalset.decode().splitlines()[0])
    differing = {**first, "expected": {**first["expected"], "priority": "p3"}}
    old_gold = lines(differing, CASE_B)
    repo.save({"spec/gold.jsonl": old_gold}, base=repo.head(), author="o", email="", message="the old layout")

    dry = io.StringIO()
    call_command("one_gold", "--dry-run", stdout=dry)
    assert "would fold" in dry.getvalue() and "gold.jsonl" in repo.files(prefix="spec/")

    out = io.StringIO()
    call_command("one_gold", stdout=out)
    report = out.getvalue()
    assert "triage: folded: 1 case(s) only the old gold had, added: b" in report
    assert f"{first['id']} -> {first['id']}-gold" in report
    now = repo.files(prefix="pack/")["evalset.jsonl"].decode().splitlines()
    assert now[: len(evalset.decode().splitlines())] == evalset.decode().splitlines()  # the evalset's own, untouched
    added = [json.loads(line) for line in now[len(evalset.decode().splitlines()) :]]
    assert [c["id"] for c in added] == [f"{first['id']}-gold", "b"]
    assert added[0]["expected"]["priority"] == "p3"
    assert "gold.jsonl" not in repo.files(prefix="spec/")
    assert repo.log(limit=1)[0].message.startswith("One gold: spec/gold.jsonl folded")
    project.refresh_from_db()
    assert project.head == repo.head()

    head = repo.head()
    again = io.StringIO()
    call_command("one_gold", stdout=again)
    assert again.getvalue() == "" and repo.head() == head  # nothing left to move: silent, no commit


def test_the_command_leaves_a_project_whose_files_are_not_utf8(project: Project) -> None:
    repo = PackRepo(project.repo_path)
    repo.save({"spec/gold.jsonl": b"caf\xe9\n"}, base=repo.head(), author="o", email="", message="latin-1")
    head = repo.head()
    out, err = io.StringIO(), io.StringIO()
    call_command("one_gold", stdout=out, stderr=err)
    assert "triage: not moved: its evalset or old gold is not UTF-8 text" in err.getvalue()
    assert repo.head() == head
