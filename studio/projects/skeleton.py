"""The pack a new empty project starts from: the smallest pack that loads and whose eval
passes on its own scripted model (manifest, one generate node, its prompt and grammar,
one evalset case, the script), each file saying where docs/pack-format.md describes it.
A person replaces the question, the answer and the case with their own."""

from __future__ import annotations

import json

DOC = "docs/pack-format.md"  # in the repository; the studio serves it at /docs/pack-format


def skeleton_files(slug: str) -> dict[str, bytes]:
    """The skeleton pack's files (paths relative to the pack root) for project `slug`."""
    files = {
        "manifest.yaml": f"""# The pack's manifest: {DOC}, section "manifest.yaml".
name: {slug}
version: "0.1"
description: >
  A skeleton to replace: answer one question. Rename the input, change the prompt, the
  grammar and the evalset case, then add nodes and edges (graph.yaml).
entry: answer
# A scripted model (fakes/scripted.json) so the pack runs offline; name an endpoint or an
# openai:URL#model spec here, or pick an endpoint when you run it.
model: fake:fakes/scripted.json
inputs: [question]
output: [answer]
""",
        "graph.yaml": f"""# Nodes and edges: {DOC}, section "graph.yaml".
nodes:
  answer:
    kind: generate
    reads: [input.question]
    writes: [answer]
  done:
    kind: end
edges:
  - {{from: answer, to: done}}
""",
        "prompts/answer.txt": (
            "Answer the question in a few words.\n\n"
            "Question: {{ input.question }}\n\n"
            'Reply with JSON only: {"answer": "<your answer>"}\n'
        ),
        "grammars/answer.json": json.dumps(
            {
                "$comment": f"The answer's JSON Schema, sent to the model as a grammar: {DOC}, section generate.",
                "type": "object",
                "properties": {"answer": {"type": "string", "minLength": 1}},
                "required": ["answer"],
                "additionalProperties": False,
            },
            indent=2,
        )
        + "\n",
        "evalset.jsonl": json.dumps(
            {
                "id": "first-case",
                "input": {"question": "What is the capital of France?"},
                "expected": {"answer": "Paris"},
                "end": "done",
                "note": f"Gold cases, one per line: {DOC}, section evalset.jsonl.",
            }
        )
        + "\n",
        "fakes/scripted.json": json.dumps(
            {"nodes": {"answer": {"answer": "Paris"}}, "$comment": f"A scripted model: {DOC}; answers per node."},
            indent=2,
        )
        + "\n",
        "README.md": (
            f"# {slug}\n\n"
            "A skeleton pack: one `generate` node (`answer`) that reads `input.question` and writes "
            "`answer`, checked by `grammars/answer.json`, prompted by `prompts/answer.txt`, ending at `done`.\n"
            "`evalset.jsonl` holds one gold case; `fakes/scripted.json` is the scripted model the manifest "
            "names, so the eval passes offline.\n\n"
            f"The format of every file: {DOC} (in the studio: /docs/pack-format).\n"
        ),
    }
    return {path: text.encode() for path, text in files.items()}
