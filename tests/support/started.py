"""`scripts/start` run for real, as tests/test_start.py and the browser tests (tests/e2e)
start it: its output read line by line, waited on by pattern."""

from __future__ import annotations

import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def group_processes(pgid: int) -> dict[int, str]:
    """pid -> command line of every live process in the process group."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
    return out


class Started:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.port = proc, port
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def close(self) -> None:
        self._reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        def seen() -> re.Match[str] | None:
            match = re.search(pattern, self.output, re.M)
            if match is None and self.proc.poll() is not None:
                raise AssertionError(f"scripts/start exited; no {pattern!r} in its output:\n{self.output}")
            return match

        return wait_until(
            seen, timeout=timeout, message=lambda: f"no {pattern!r} in scripts/start's output:\n{self.output}"
        )


@dataclass
class Studio:
    """A studio the browser tests share: where it serves, the admin password, its var/."""

    url: str
    password: str
    var: Path
