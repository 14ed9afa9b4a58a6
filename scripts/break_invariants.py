"""Break each DESIGN.md invariant on purpose, one at a time, and show its test fails.

Run from the repository root: .venv/bin/python scripts/break_invariants.py
Each patch is applied to a runtime file, the invariant's test is run, and the file is restored."""

import pathlib
import subprocess

BREAKS = {
    1: (
        "runtime/nodes/generate.py",
        "                if walk.verify:\n                    writes = verify_answer(node, answer, walk.state, walk.input)",
        "                if False:\n                    writes = verify_answer(node, answer, walk.state, walk.input)",
    ),
    2: ("runtime/nodes/generate.py", "reason = exc.reason\n", 'reason = exc.reason + " you said: " + reply.text\n'),
    3: (
        "runtime/walker.py",
        '    view = {**walk.state, **outcome.writes, "input": walk.input}\n',
        '    view = {**walk.state, **outcome.writes, "input": walk.input}\n    if outcome.writes.get("goto") in pack.nodes:\n        return Edge(node.id, outcome.writes["goto"])\n',
    ),
    4: (
        "runtime/walk.py",
        "        made = self.pending_tools.get((node.id, self.step), [])\n        for entry in made:",
        "        made = self.pending_tools.get((node.id, self.step), [])\n        for entry in []:",
    ),
    5: (
        "runtime/walk.py",
        "        found = self.tools.get(tool_name)\n",
        "        import importlib\n        from runtime.tools import tool_def\n        found = self.tools.get(tool_name) or tool_def(tool_name, getattr(importlib.import_module(tool_name.rpartition('.')[0]), tool_name.rpartition('.')[2]))\n",
    ),
    6: (
        "runtime/cli_eval.py",
        "    gate = check_baseline(report.metrics(), baseline) if baseline is not None else None",
        "    gate = check_baseline(report.metrics(), baseline) if baseline is not None else None\n    (pack.root / 'evalset.jsonl').write_text(''.join(__import__('json').dumps({'id': c.case_id, 'input': pack.cases[i].input, 'expected': c.output}) + '\\n' for i, c in enumerate(report.cases)))",
    ),
}
for n, (path, old, new) in BREAKS.items():
    p = pathlib.Path(path)
    orig = p.read_text()
    assert old in orig, (n, old)
    p.write_text(orig.replace(old, new, 1))
    try:
        r = subprocess.run(
            [
                ".venv/bin/python",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"tests/runtime/test_invariants.py::test_invariant_{n}_"
                + {
                    1: "nothing_unverified_is_committed",
                    2: "a_rejected_generation_never_reaches_the_model_again",
                    3: "the_model_never_chooses_the_next_node",
                    4: "a_returned_tool_call_is_never_executed_again",
                    5: "a_pack_reaches_only_registered_tools",
                    6: "no_automated_process_edits_the_evalset",
                }[n],
            ],
            capture_output=True,
            text=True,
        )
        last = r.stdout.strip().splitlines()[-1]
        print(n, "FAILS as it should" if r.returncode else "STILL PASSES", "|", last)
    finally:
        p.write_text(orig)
