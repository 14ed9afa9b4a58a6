"""kombu's filesystem broker, with every file written whole before anyone can read it.

The broker a process falls back to when it has no Redis (the test suite, a one-off
`manage.py` command; see "The embedded broker" in docs/deploy.md). kombu's own
filesystem transport creates a message file and then writes into it. A consumer that
lists the folder in between moves the still-empty file away, fails to decode it, and the
worker exits ("Unrecoverable error: JSONDecodeError"), with the message lost. Its
exchange tables (the fanout bindings under the control folder) are truncated in place
the same way, so a reader can find one empty.

Here a message is written under a name no consumer matches and then renamed to its
queue name, and an exchange table is rewritten the same way under a lock file that
serialises the writers. A rename within one folder is atomic on POSIX, so a reader sees
a file whole or not at all. Selected by CELERY_BROKER_TRANSPORT in studio/settings.py.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.json import dumps, loads

# A file still being written ends with this; `_get` only takes names ending ".<queue>.msg".
PART_SUFFIX = ".part"


def write_whole(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees either no file or all of it."""
    part = path.with_name(f"{path.name}.{uuid.uuid4().hex}{PART_SUFFIX}")
    try:
        with open(part, "wb") as f:
            f.write(data)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


class Channel(filesystem.Channel):
    def _put(self, queue: Any, message: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu names it two ways
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        path = Path(self.data_folder_out) / name
        try:
            write_whole(path, dumps(message).encode())
        except OSError as exc:
            raise ChannelError(f"cannot add message file {str(path)!r}") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._edit_table(exchange, lambda table: table if entry in table else [entry, *table])

    def _delete(self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any) -> None:
        # kombu's Channel._delete would rewrite the table in place; skip to the virtual one.
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._edit_table(exchange, lambda table: [q for q in table if q != entry])

    def _edit_table(self, exchange: str, change: Callable[[list[Any]], list[Any]]) -> None:
        """Rewrite `exchange`'s table as `change` makes it, one writer at a time."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        try:
            with open(file.with_name(file.name + ".lock"), "wb") as lock_file:
                filesystem.lock(lock_file, filesystem.LOCK_EX)
                try:
                    table = [filesystem.exchange_queue_t(*q) for q in loads(file.read_bytes())] if file.exists() else []
                    changed = change(table)
                    if changed != table:
                        write_whole(file, dumps(changed).encode())
                finally:
                    filesystem.unlock(lock_file)
        except OSError as exc:
            raise ChannelError(f"cannot rewrite exchange file {str(file)!r}") from exc


class Transport(filesystem.Transport):
    Channel = Channel
