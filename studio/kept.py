"""The values a process keeps for what it served recently: at most `size` of them by
key, the least recently used dropped first. Used for the opened evals and deployments
(studio.evals.worker, studio.deployments.runners), which close what is dropped, and
for trace windows (studio.runs.windows).

`size` is read at each put (a function: the module setting it names can change, in a
test or a shell). `lock` is re-entrant and public: a caller that opens a value on a
miss holds it over the get and the put, so one key is opened once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self.lock = threading.RLock()
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value kept under `key`, now the most recently used; None when none is."""
        with self.lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, key: K, value: V) -> list[V]:
        """Keep `value` under `key`; returns the values dropped to stay within `size`."""
        with self.lock:
            self._items[key] = value
            self._items.move_to_end(key)
            dropped: list[V] = []
            while len(self._items) > self.size():
                dropped.append(self._items.popitem(last=False)[1])
            return dropped

    def drain(self) -> list[V]:
        """Drop every value; returns them."""
        with self.lock:
            values = list(self._items.values())
            self._items.clear()
            return values
