"""Recorded tool results, for deterministic re-evaluation (docs/tools.md, "Recorded tool
results").

A `ToolTape` in mode "record" keeps every tool call a run makes live: (case_id, node,
index, tool, args, result), `index` being the call's position among the run's tool
calls (0-based). A tape in mode "replay" answers every tool call of a run from such a
recording instead of calling the tool: the call recorded at the same case and index,
when it is the same tool with the same arguments (the node may differ: a later pack
version may rename it). Anything else is a **divergence**: the call is not made live,
the tool node fails with ToolOutcome kind `diverged`, and `evaluate` reports the case as
`diverged` (neither a pass nor a model failure).

A tape is shared by the runs of an eval; each run gets its own view (`for_run`) that
counts what it recorded, replayed and where it diverged. The file format is JSONL, one
call per line, sorted by case and index:

    {"case_id": "rd-01", "node": "lookup", "index": 0, "tool": "lookup_order",
     "args": {"order_id": "ORD-10001"}, "result": {"order": {...}}}

A call that failed when it was recorded (the tool raised, or its result broke the
declared schema) is kept too, with `"error": {"kind": "raised", "reason": "..."}` and
`"result": null`; a replay fails it the same way (a RecordedFailure), without calling
the tool. A failed call is not journaled, so it shares its index with the call after
it; the replay tells them apart by tool and arguments, and answers a recorded failure once
per run (a run that retried the same call gets the failure, then the success).

Keys are by case id, so a tape recorded with `repeats` > 1 keeps the first run's call
at each index of a case (the others are counted, not kept). Runs without a case id
(`packforge run`) record and replay under the case id "".

A leaf: it knows tool calls, not runs, and imports nothing of the walker."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import PackforgeError
from runtime.tools import Divergence, RecordedFailure, same_call

if TYPE_CHECKING:
    from runtime.trace import Trace

__all__ = ["MODES", "RecordedCall", "RunTape", "TapeError", "ToolTape"]

MODES = ("record", "replay")


class TapeError(PackforgeError):
    """A tape file that cannot be read (not JSONL of recorded calls)."""


@dataclass(frozen=True)
class RecordedCall:
    case_id: str
    node: str
    index: int
    tool: str
    args: dict[str, Any]
    result: Any
    error: dict[str, str] | None = None  # {"kind", "reason"} when the call failed

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.error is None:
            del data["error"]
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> RecordedCall:
        at = f" ({where})" if where else ""
        if not isinstance(data, dict):
            raise TapeError(f"a recorded call must be a JSON object{at}")
        missing = [k for k in ("case_id", "node", "index", "tool", "args", "result") if k not in data]
        if missing:
            raise TapeError(f"a recorded call is missing {', '.join(missing)}{at}")
        index = data["index"]
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise TapeError(f"a recorded call's index must be a whole number from 0{at}")
        if not isinstance(data["args"], dict):
            raise TapeError(f"a recorded call's args must be a JSON object{at}")
        error = data.get("error")
        if error is not None and not (
            isinstance(error, dict) and isinstance(error.get("kind"), str) and isinstance(error.get("reason"), str)
        ):
            raise TapeError(f"a recorded call's error must be an object with kind and reason{at}")
        case_id = str(data["case_id"] or "")
        return cls(case_id, str(data["node"]), index, str(data["tool"]), data["args"], data["result"], error)


def _case(case_id: str | None) -> str:
    return case_id or ""


class ToolTape:
    """The recorded tool calls of an eval (or run), keyed by (case_id, index); in
    mode "record" it gathers them, in mode "replay" it answers from them. Thread-safe:
    an eval's runs share one tape."""

    def __init__(self, mode: str, calls: Iterable[RecordedCall] = ()) -> None:
        if mode not in MODES:
            raise ValueError(f"a tape's mode is record or replay, not {mode!r}")
        self.mode = mode
        self._calls: dict[tuple[str, int], RecordedCall] = {}
        self._failures: dict[tuple[str, int], list[RecordedCall]] = {}
        self._lock = threading.Lock()
        for call in calls:
            self._keep(call)

    def _keep(self, call: RecordedCall) -> None:
        key = (call.case_id, call.index)
        if call.error is None:
            self._calls.setdefault(key, call)
            return
        failed = self._failures.setdefault(key, [])
        if not any(same_call(f.tool, f.args, call.tool, call.args) for f in failed):
            failed.append(call)

    # -- the TapeHook contract (runtime.tools.TapeHook) ---------------------------------

    def lookup(
        self,
        case_id: str | None,
        node: str,
        index: int,
        tool: str,
        args: dict[str, Any],
        *,
        spent: set[tuple[int, str]] | None = None,
    ) -> Any:
        """The recorded result of this call, or a Divergence saying how it differs. A
        recorded failure of this call is answered once per run: `spent` (the run's) holds
        the failures already answered, so a run that retried the same call after it
        failed gets the failure, then the success recorded at the same index."""
        with self._lock:
            found = self._calls.get((_case(case_id), index))
            failed = list(self._failures.get((_case(case_id), index), []))
        for f in failed:
            mark = (index, json.dumps([f.tool, f.args], sort_keys=True, default=str))
            if same_call(f.tool, f.args, tool, args) and f.error is not None and mark not in (spent or set()):
                if spent is not None:
                    spent.add(mark)
                return RecordedFailure(f.error["kind"], f.error["reason"])
        case = f"case '{case_id}'" if case_id else "this run"
        if found is None:
            return Divergence(f"{case} has no recorded tool call #{index + 1} ({tool} at node '{node}')")
        if not same_call(found.tool, found.args, tool, args):
            return Divergence(
                f"{case}'s tool call #{index + 1} was recorded as {found.tool}({_show(found.args)}); "
                f"this run called {tool}({_show(args)}) at node '{node}'"
            )
        return found.result

    def record(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], result: Any) -> None:
        """Keep a call made live (the first one at its case and index; see the module)."""
        call = RecordedCall(_case(case_id), node, index, tool, json.loads(json.dumps(args)), result)
        with self._lock:
            self._keep(call)

    def record_failure(
        self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], kind: str, reason: str
    ) -> None:
        """Keep a call made live that failed (raised, bad_result): a replay fails it alike."""
        error = {"kind": kind, "reason": reason}
        call = RecordedCall(_case(case_id), node, index, tool, json.loads(json.dumps(args, default=str)), None, error)
        with self._lock:
            self._keep(call)

    # -- a run's view ------------------------------------------------------------------

    def for_run(self) -> RunTape:
        """A hook for one run (RunOptions.tape): it counts that run's calls."""
        return RunTape(self)

    def record_trace(self, trace: Trace) -> int:
        """Keep every tool call of a finished run's trace not recorded yet (a run resumed
        after a kill made some of its calls in an earlier process: its journal has them).
        Returns how many were added."""
        added = 0
        with self._lock:
            for index, tc in enumerate(trace.tool_calls):
                key = (_case(trace.case_id), index)
                if key not in self._calls:
                    self._calls[key] = RecordedCall(key[0], tc.node, index, tc.tool, tc.args, tc.result)
                    added += 1
        return added

    # -- contents and files ------------------------------------------------------------

    def calls(self, case_id: str | None = None) -> list[RecordedCall]:
        """The recorded calls, by case then index (of one case when `case_id` is given)."""
        with self._lock:
            found = [*self._calls.values(), *(f for failed in self._failures.values() for f in failed)]
        if case_id is not None:
            found = [c for c in found if c.case_id == case_id]
        # a failed call before the call that shares its index (it was made first)
        return sorted(found, key=lambda c: (c.case_id, c.index, c.error is None))

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls) + sum(len(f) for f in self._failures.values())

    def __iter__(self) -> Iterator[RecordedCall]:
        return iter(self.calls())

    def to_jsonl(self) -> str:
        return "".join(json.dumps(c.to_dict(), sort_keys=True) + "\n" for c in self.calls())

    @classmethod
    def from_jsonl(cls, text: str, mode: str = "replay", *, name: str = "the tape") -> ToolTape:
        calls = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TapeError(f"{name}, line {number}: not JSON ({exc.msg})") from None
            calls.append(RecordedCall.from_dict(data, f"{name}, line {number}"))
        return cls(mode, calls)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_jsonl(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, mode: str = "replay") -> ToolTape:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TapeError(f"cannot read the tool recording {path}: {exc.strerror or exc}") from None
        return cls.from_jsonl(text, mode, name=str(path))


@dataclass
class RunTape:
    """One run's hook on a shared ToolTape: the same mode, and this run's counts."""

    tape: ToolTape
    recorded: int = 0  # calls made live and recorded (mode record)
    replayed: int = 0  # calls answered from the recording (mode replay)
    divergences: list[str] = field(default_factory=list)  # why calls were not answered (mode replay)
    spent: set[tuple[int, str]] = field(default_factory=set)  # recorded failures answered already
    mode: str = field(init=False)

    def __post_init__(self) -> None:
        self.mode = self.tape.mode

    @property
    def diverged(self) -> bool:
        return bool(self.divergences)

    def lookup(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any]) -> Any:
        found = self.tape.lookup(case_id, node, index, tool, args, spent=self.spent)
        if isinstance(found, Divergence):
            self.divergences.append(found.reason)
        else:
            self.replayed += 1
        return found

    def record_failure(
        self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], kind: str, reason: str
    ) -> None:
        self.tape.record_failure(case_id, node, index, tool, args, kind, reason)
        self.recorded += 1

    def record(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], result: Any) -> None:
        self.tape.record(case_id, node, index, tool, args, result)
        self.recorded += 1


def _show(args: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in sorted(args.items()))
    return text if len(text) <= 200 else text[:199] + "…"
