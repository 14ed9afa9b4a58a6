"""The compiler's exceptions, under the runtime's one error tree (PackforgeError)."""

from __future__ import annotations

from runtime import PackforgeError, PackIssue


class CompilerError(PackforgeError):
    """Base of every error the compiler raises on purpose."""


class SpecInvalid(CompilerError):
    """A spec folder failed to load. Carries every issue found, not only the first; each
    is a runtime PackIssue naming its file (spec.yaml or gold.jsonl) and line."""

    def __init__(self, issues: list[PackIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


class PlanInvalid(CompilerError):
    """A plan document failed its checks (compiler.plan.parse_plan). Carries every
    problem found, each a sentence starting with its JSON path (`nodes[2].writes: ...`)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))
