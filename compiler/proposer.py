"""The search's source of proposed instruction texts (compiler.proposals) for one arm:
given a node and the incumbent's outcomes on the validation split, the failing cases
go to the model planner, and each text it proposes becomes a prompt value
(`proposal-<key>`, compiler.trials) the search tries like any other.

Only validation outcomes reach it (the search scores nothing else), so no test case
is ever shown to the planner. Each answer is kept in `proposals.jsonl` beside the target
cache, under the hash of its request, so a resumed build or a rebuild with the same cache
asks the planner nothing it has asked before (and a planner that fails or a cancel only
means no proposal); the planner's tokens and dollars count against the
spec's planner budgets, from what the attempts already spent."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from compiler.plan import Plan
from compiler.planners.model import ModelPlanner
from compiler.proposals import Failure, prompt, propose
from compiler.spec import Spec
from compiler.trials import CaseOutcome, NodeSetting, Setting, TrialRunner, instructions_for, proposal_key
from runtime import BackendError, Cancelled

PROPOSALS_FILE = "proposals.jsonl"
COUNT = 2  # texts asked for per node and incumbent


@dataclass
class Proposer:
    planner: ModelPlanner
    spec: Spec
    plan: Plan
    runner: TrialRunner
    folder: Path  # where proposals.jsonl is kept: the target cache's folder
    tokens: int = 0  # planner tokens spent so far (the attempts' and these)
    cost_usd: float = 0.0
    cancel: threading.Event | None = None
    asked: int = 0  # requests made to the planner (not answered from the file)
    failed: int = 0  # requests the planner failed (an error, or a cancel): the search goes on without them
    _stored: dict[str, list[str]] | None = field(default=None, repr=False)

    def __call__(self, node_id: str, incumbent: Setting, outcomes: list[CaseOutcome]) -> list[str]:
        node = next(n for n in self.plan.nodes if n.id == node_id)
        current_setting = dict(incumbent).get(node_id, NodeSetting())
        current = (
            instructions_for(node, self.spec, current_setting.prompt, self.runner.proposals)
            or node.instructions
            or node.description
            or self.spec.task
        )
        failures = self.failures(node.writes, outcomes)
        if not failures:
            return []
        key = hashlib.sha256(prompt(self.spec, node, current, failures, COUNT).encode()).hexdigest()
        stored = self.stored()
        if key not in stored:
            try:
                result = propose(
                    self.planner,
                    self.spec,
                    node,
                    current,
                    failures,
                    count=COUNT,
                    cancel=self.cancel,
                    spent_tokens=self.tokens,
                    spent_cost_usd=self.cost_usd,
                )
            except (BackendError, Cancelled):  # the planner failed or the compile was cancelled: no proposal
                self.failed += 1
                return []
            self.tokens += result.tokens
            self.cost_usd += result.cost_usd
            self.asked += 1
            stored[key] = list(result.texts)
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / PROPOSALS_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, "node": node_id, "texts": stored[key]}) + "\n")
        values = []
        for text in stored[key]:
            value = proposal_key(text)
            self.runner.proposals[value] = text
            values.append(value)
        return values

    def failures(self, writes: tuple[str, ...], outcomes: list[CaseOutcome]) -> list[Failure]:
        """The cases whose expected value of a field the node writes did not match."""
        out = []
        for o in outcomes:
            if all(o.fields.get(w, True) for w in writes):
                continue
            case = self.runner.by_id[o.id]
            out.append(
                Failure(
                    o.id,
                    dict(case.input),
                    {w: o.output.get(w) for w in writes},
                    {w: case.expected[w] for w in writes if w in case.expected},
                )
            )
        return out

    def stored(self) -> dict[str, list[str]]:
        """The answers kept in proposals.jsonl, by request hash (read once)."""
        if self._stored is None:
            self._stored = {}
            path = self.folder / PROPOSALS_FILE
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    try:
                        row = json.loads(line)
                        self._stored[str(row["key"])] = [str(t) for t in row["texts"]]
                    except (ValueError, KeyError, TypeError):
                        continue  # a line cut by a kill: that request is asked again
        return self._stored


__all__ = ["COUNT", "PROPOSALS_FILE", "Proposer"]
