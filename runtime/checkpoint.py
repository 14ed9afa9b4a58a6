"""Checkpoint stores: a run row plus an append-only journal of what each step did.

Every write carries the fencing token the writer got when it took the run. Taking a
run over bumps the token, so a stalled process that wakes up and writes with its old
token is refused (FencedOut) instead of overwriting the new owner's work."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runtime.errors import FencedOut, RunNotFound, RunStateError


@dataclass
class RunRecord:
    run_id: str
    pack: str
    digest: str
    input: dict[str, Any]
    case_id: str | None
    status: str  # running | waiting | done | failed | cancelled
    fence: int
    result: dict[str, Any] | None = None


@dataclass
class Entry:
    seq: int
    kind: str  # step | tool | wait
    node: str
    step: int
    payload: dict[str, Any]


class CheckpointStore(Protocol):
    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        """Create the run; return its first fencing token. Raises RunStateError if it exists."""

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        """Bump the fence and return the new token, the run and its journal."""

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        """Append to the journal if `fence` is still current, else raise FencedOut."""

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None: ...

    def get(self, run_id: str) -> RunRecord: ...

    def close(self) -> None: ...


class MemoryStore:
    """Checkpoints in a dict: for tests, benchmarks and runs nobody will resume. What goes
    in and what comes out are copies, as with the stores that serialise: a caller that
    changes a record it was handed (or the input it began with) changes nothing here."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._journal: dict[str, list[Entry]] = {}
        self._lock = threading.Lock()

    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        with self._lock:
            if run_id in self._runs:
                raise RunStateError(f"run '{run_id}' already exists; use --resume {run_id}")
            self._runs[run_id] = RunRecord(run_id, pack, digest, copy.deepcopy(input), case_id, "running", 1)
            self._journal[run_id] = []
            return 1

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        with self._lock:
            record = self._get(run_id)
            record.fence += 1
            return record.fence, copy.deepcopy(record), copy.deepcopy(self._journal[run_id])

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        with self._lock:
            self._check(run_id, fence)
            journal = self._journal[run_id]
            journal.append(Entry(len(journal) + 1, kind, node, step, copy.deepcopy(payload)))

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None:
        with self._lock:
            record = self._check(run_id, fence)
            record.status = status
            record.result = copy.deepcopy(result)

    def get(self, run_id: str) -> RunRecord:
        with self._lock:
            return copy.deepcopy(self._get(run_id))

    def close(self) -> None:
        pass

    def _get(self, run_id: str) -> RunRecord:
        if run_id not in self._runs:
            raise RunNotFound(f"no run '{run_id}' in this store")
        return self._runs[run_id]

    def _check(self, run_id: str, fence: int) -> RunRecord:
        record = self._get(run_id)
        if record.fence != fence:
            raise FencedOut(f"run '{run_id}' was taken over (fence {record.fence}, this writer has {fence})")
        return record


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, pack TEXT NOT NULL, digest TEXT NOT NULL, input TEXT NOT NULL,
        case_id TEXT, status TEXT NOT NULL, fence INTEGER NOT NULL, result TEXT,
        created REAL NOT NULL, updated REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS journal (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, node TEXT NOT NULL,
        step INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (run_id, seq))""",
]


class SQLiteStore:
    """Checkpoints in SQLite (WAL). `synchronous="normal"` survives a killed process;
    `"full"` also survives power loss, at the cost of an fsync per step."""

    def __init__(self, path: str | Path, synchronous: str = "normal", busy_timeout_ms: int = 10_000) -> None:
        if synchronous.lower() not in ("normal", "full"):
            raise ValueError("synchronous must be 'normal' or 'full'")
        self.path = str(path)
        self.synchronous = synchronous.upper()
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []  # every thread's connection, for close()
        self._opened_lock = threading.Lock()
        with self._tx() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    class _Tx:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            # IMMEDIATE takes the write lock up front, so the fence check and the
            # write that depends on it cannot interleave with another writer.
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> SQLiteStore._Tx:
        return SQLiteStore._Tx(self._conn())

    def begin(self, run_id: str, *, pack: str, digest: str, input: dict[str, Any], case_id: str | None) -> int:
        now = time.time()
        with self._tx() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
                raise RunStateError(f"run '{run_id}' already exists; use --resume {run_id}")
            db.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)",
                (run_id, pack, digest, json.dumps(input), case_id, "running", 1, None, now, now),
            )
        return 1

    def take_over(self, run_id: str) -> tuple[int, RunRecord, list[Entry]]:
        with self._tx() as db:
            db.execute("UPDATE runs SET fence = fence + 1, updated = ? WHERE run_id = ?", (time.time(), run_id))
            record = self._record(db, run_id)
            rows = db.execute(
                "SELECT seq, kind, node, step, payload FROM journal WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
        return record.fence, record, [Entry(s, k, n, st, json.loads(p)) for s, k, n, st, p in rows]

    def append(self, run_id: str, fence: int, kind: str, node: str, step: int, payload: dict[str, Any]) -> None:
        with self._tx() as db:
            self._check(db, run_id, fence)
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM journal WHERE run_id=?", (run_id,)).fetchone()[0]
            db.execute("INSERT INTO journal VALUES (?,?,?,?,?,?)", (run_id, seq, kind, node, step, json.dumps(payload)))

    def set_status(self, run_id: str, fence: int, status: str, result: dict[str, Any] | None = None) -> None:
        with self._tx() as db:
            self._check(db, run_id, fence)
            db.execute(
                "UPDATE runs SET status=?, result=?, updated=? WHERE run_id=?",
                (status, json.dumps(result) if result is not None else None, time.time(), run_id),
            )

    def get(self, run_id: str) -> RunRecord:
        return self._record(self._conn(), run_id)

    def close(self) -> None:
        """Close the connections of every thread that used this store."""
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _record(db: sqlite3.Connection, run_id: str) -> RunRecord:
        row = db.execute(
            "SELECT run_id, pack, digest, input, case_id, status, fence, result FROM runs WHERE run_id=?", (run_id,)
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no run '{run_id}' in this checkpoint database")
        rid, pack, digest, inp, case_id, status, fence, result = row
        return RunRecord(
            rid, pack, digest, json.loads(inp), case_id, status, fence, json.loads(result) if result else None
        )

    @staticmethod
    def _check(db: sqlite3.Connection, run_id: str, fence: int) -> None:
        row = db.execute("SELECT fence FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run '{run_id}' in this checkpoint database")
        if row[0] != fence:
            raise FencedOut(f"run '{run_id}' was taken over (fence {row[0]}, this writer has {fence})")
