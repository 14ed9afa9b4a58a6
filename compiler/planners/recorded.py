"""A planner that replays plan documents from files: no model, no network. The compile
loop's tests and the example specs' regenerations use it (`specs/<pack>/plans/1.json`).

`recorded:PATH`: PATH is one plan document (every attempt gets it), or a folder of
`1.json`, `2.json`, ...: attempt N gets `N.json`, and attempts past the last file get
the last one again."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError
from compiler.planners.base import PlanRequest, PlanResult
from runtime import Cancelled

_NUMBERED = re.compile(r"([1-9][0-9]*)\.json")


class RecordedPlanner:
    """Replays the plan documents at `path` (a .json file or a folder of N.json)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = f"recorded:{path}"

    def files(self) -> list[Path]:
        """The plan files, in attempt order."""
        if self.path.is_file():
            return [self.path]
        if self.path.is_dir():
            numbered = [(int(m.group(1)), p) for p in self.path.iterdir() if (m := _NUMBERED.fullmatch(p.name))]
            if numbered:
                return [p for _, p in sorted(numbered)]
            raise CompilerError(f"recorded planner: {self.path} holds no plan files named 1.json, 2.json, ...")
        raise CompilerError(f"recorded planner: no such file or folder {self.path}")

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult:
        if cancel is not None and cancel.is_set():
            raise Cancelled("compile cancelled")
        files = self.files()
        chosen = files[min(request.attempt, len(files)) - 1]
        try:
            document: Any = json.loads(chosen.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CompilerError(f"recorded planner: {chosen} is not a JSON plan document: {exc}") from None
        if not isinstance(document, dict):
            raise CompilerError(f"recorded planner: {chosen} holds {type(document).__name__}, not a plan object")
        return PlanResult(document=document)
