"""Packforge runtime: load a pack, walk it against a model, verify every answer before
committing it, checkpoint every step, score a pack against its evalset.

Imports no Django, Celery or studio code: a downloaded pack runs with httpx,
jsonschema and PyYAML installed."""

from runtime.backends import Backend, ModelCall, ModelReply, open_backend
from runtime.checkpoint import CheckpointStore, MemoryStore, SQLiteStore
from runtime.errors import (
    BackendError,
    BadSpec,
    Cancelled,
    ExprError,
    FencedOut,
    OutputRejected,
    PackforgeError,
    PackInvalid,
    PackIssue,
    RunNotFound,
    RunStateError,
)
from runtime.pack import Pack, load_pack
from runtime.trace import Trace
from runtime.walker import RunOptions, RunResult, resume_run, run_pack

__all__ = [
    "Backend",
    "BackendError",
    "BadSpec",
    "Cancelled",
    "CheckpointStore",
    "ExprError",
    "FencedOut",
    "MemoryStore",
    "ModelCall",
    "ModelReply",
    "OutputRejected",
    "Pack",
    "PackInvalid",
    "PackIssue",
    "PackforgeError",
    "RunNotFound",
    "RunOptions",
    "RunResult",
    "RunStateError",
    "SQLiteStore",
    "Trace",
    "load_pack",
    "open_backend",
    "resume_run",
    "run_pack",
]
