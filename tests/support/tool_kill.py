"""Killing a real `packforge run` between a side effect and its journal write, for the
kill test (tests/integration/test_tool_kill.py) and its measurement
(benchmarks/tool_kill.py).

The pack: lookup (read-only tool) -> charge (side effects) -> notify (side effects) ->
done. Each side-effecting tool appends its idempotency key to `attempts.log` on every
execution (what reaches the provider) and to `effects.log` only for a key it has not
seen (what a provider that deduplicates on the key lets happen). With the environment
variable TOOL_KILL_READY_FD set, `charge` writes a line to that file descriptor after its
side effect and then blocks, so the parent can SIGKILL the process exactly in the window
before the result is journaled. TOOL_KILL_LATENCY_S makes each tool take that long on
either side of its effect (a remote call: the effect lands mid-call)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from runtime import RunNotFound, SQLiteStore
from tests.support.runtime_packs import LOOKUP_NODE, REPO, write_pack

TOOLS = """
import os
import threading
import time
from pathlib import Path

from runtime import tool

LOG = Path(os.environ["TOOL_KILL_DIR"])
LATENCY = float(os.environ.get("TOOL_KILL_LATENCY_S") or 0)


def _effect(key):
    time.sleep(LATENCY)
    with open(LOG / "attempts.log", "a") as f:
        f.write(key + "\\n")
    done = (LOG / "effects.log").read_text().split() if (LOG / "effects.log").exists() else []
    if key not in done:  # the provider deduplicates on the idempotency key
        with open(LOG / "effects.log", "a") as f:
            f.write(key + "\\n")
    time.sleep(LATENCY)


@tool(
    description="Look up an order's total.",
    args={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    result={"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]},
)
def lookup(order_id):
    time.sleep(LATENCY)
    return {"total": 40.0}


@tool(
    description="Charge an order (a side effect).",
    args={"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
          "required": ["order_id", "amount"]},
    result={"type": "object", "properties": {"charge_id": {"type": "string"}}, "required": ["charge_id"]},
    side_effects=True,
)
def charge(order_id, amount, *, idempotency_key):
    _effect(idempotency_key)
    ready = os.environ.get("TOOL_KILL_READY_FD")
    if ready:  # the window: the effect is done, its result not yet journaled
        os.write(int(ready), b"ready\\n")
        threading.Event().wait()
    return {"charge_id": "C-" + order_id}


@tool(
    description="Tell the customer (a side effect).",
    args={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    side_effects=True,
)
def notify(order_id, *, idempotency_key):
    _effect(idempotency_key)
    return {"notified": True}


registry = {"lookup": lookup, "charge": charge, "notify": notify}
"""


def write_kill_pack(root: Path) -> tuple[Path, str]:
    """The pack and its tools under `root`; returns (pack dir, --tools reference)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kill_tools.py").write_text(TOOLS)
    pack = write_pack(
        root / "pack",
        manifest={"tools": ["lookup", "charge", "notify"]},
        nodes={
            "lookup": LOOKUP_NODE,
            "charge": {
                "kind": "tool",
                "tool": "charge",
                "reads": ["input.order", "total"],
                "args": {"order_id": "input.order", "amount": "total"},
                "writes": ["charge_id"],
            },
            "notify": {
                "kind": "tool",
                "tool": "notify",
                "reads": ["input.order"],
                "args": {"order_id": "input.order"},
                "writes": ["notified"],
            },
            "done": {"kind": "end"},
        },
        edges=[
            {"from": "lookup", "to": "charge"},
            {"from": "charge", "to": "notify"},
            {"from": "notify", "to": "done"},
        ],
        script={"nodes": {}},
    )
    return pack, f"{root / 'kill_tools.py'}:registry"


@dataclass
class KillBench:
    """Runs of the kill pack in one checkpoint file, their effects logged under `logs`."""

    pack: Path
    tools: str
    db: Path
    logs: Path
    latency_s: float = 0.0

    def command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "runtime",
            "run",
            str(self.pack),
            "--tools",
            self.tools,
            "--db",
            str(self.db),
            *args,
        ]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TOOL_KILL_READY_FD"}
        env.update({"TOOL_KILL_DIR": str(self.logs), "TOOL_KILL_LATENCY_S": str(self.latency_s)})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        return env

    def start(self, run_id: str, *, ready_fd: int | None = None) -> subprocess.Popen[str]:
        env = self.env()
        if ready_fd is not None:
            env["TOOL_KILL_READY_FD"] = str(ready_fd)
        return subprocess.Popen(
            self.command("--input", '{"order": "A1"}', "--run-id", run_id),
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            pass_fds=(ready_fd,) if ready_fd is not None else (),
        )

    def kill_in_the_window(self, run_id: str) -> bool:
        """Start a run and SIGKILL it once `charge` says its side effect is done (before
        the journal write). False when the run never reached that point."""
        read, write = os.pipe()
        try:
            proc = self.start(run_id, ready_fd=write)
        finally:
            os.close(write)
        with os.fdopen(read, "rb") as ready:
            line = ready.readline()  # b"" when the process ended without reaching the window
        if line == b"ready\n":
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return line == b"ready\n"

    def finish(self, run_id: str) -> subprocess.CompletedProcess[str]:
        """What a supervisor does after a kill: resume the run from its checkpoint, or
        start it again when the kill came before it was recorded; nothing when it had
        finished."""
        store = SQLiteStore(self.db)
        try:
            status = store.get(run_id).status
        except RunNotFound:
            status = None
        finally:
            store.close()
        if status is None:
            args = self.command("--input", '{"order": "A1"}', "--run-id", run_id)
        elif status in ("done", "failed"):
            return subprocess.CompletedProcess([], 0, "", "")
        else:
            args = self.command("--resume", run_id)
        return subprocess.run(args, env=self.env(), cwd=REPO, capture_output=True, text=True, timeout=120)

    def status(self, run_id: str) -> str:
        store = SQLiteStore(self.db)
        try:
            return store.get(run_id).status
        finally:
            store.close()

    def keys(self, log: str) -> list[str]:
        path = self.logs / log
        return path.read_text().split() if path.exists() else []


def duplicates(keys: list[str]) -> int:
    """How many entries repeat a key seen before."""
    return len(keys) - len(set(keys))
