"""One guard around kombu's Redis transport, installed by studio/celery.py in every
process that talks to the broker.

When Redis goes away under a worker, Celery's consumer closes its connection and
reconnects. Closing a channel first gives back the messages it holds unacknowledged,
which needs a Redis client; when the connection was already released (its `client` is
None), building one raises `AttributeError: 'NoneType' object has no attribute
'hostname'` (kombu#582, kombu#970), which Celery takes as unrecoverable: the worker
exits instead of reconnecting. One CI run of tests/integration/test_scaleout_faults.py
met it on a Redis restart.

With the guard, a channel whose connection is gone skips that give-back and says so. The
messages stay in Redis's unacked set, where kombu's `restore_visible` returns them after
the visibility timeout, and the durable-work sweep re-sends any row they were for
(studio/work/sweep.py), so no work is lost; the rest of the close goes on and the worker
reconnects. The guard is narrow: any other AttributeError still raises."""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis

log = logging.getLogger(__name__)
_original = redis.QoS.restore_unacked


def _restore_unacked(self: Any, client: Any = None) -> Any:
    connection = getattr(self.channel, "connection", None)
    if client is None and (connection is None or connection.client is None):
        log.warning(
            "the broker connection was released before %d unacknowledged message(s) could be given back; "
            "they return after the visibility timeout, and the sweep re-sends their rows",
            len(self._delivered),
        )
        return None
    return _original(self, client)


def install() -> None:
    """Put the guard in place (once; a second call changes nothing)."""
    redis.QoS.restore_unacked = _restore_unacked  # type: ignore[method-assign]  # the guard itself
