"""Clients kept between the tasks of one Python process (reuse across micro-batches).

Spark reuses its Python workers across tasks (``spark.python.worker.reuse``, on by
default), so what a task sets up (a librdkafka consumer, the writer's connections and
their metadata) can serve the next task of the same query in the same process instead of
being built again every micro-batch. A :class:`Pool` keeps such clients **idle** between
uses:

* a client is taken by one user at a time (:meth:`Pool.use`), never shared while in use,
  so the blocking clients need no locking of their own; a thread that renews a lease
  takes its own;
* clients are found by **key equality**: the key holds every setting that shapes the
  client, credentials included, so a client is never handed to a user with other
  credentials or security settings (keys are compared, never hashed or printed);
* a client whose use raised is closed, not kept (its connections or state may be bad);
* at most ``capacity`` idle clients are kept; the least recently used goes first;
* an idle client is closed once it was idle for ``idle_s`` (checked whenever the pool is
  used) and every idle client at the process's exit;
* a forked child never uses its parent's clients (they share sockets): a pool used in a
  process other than the one that filled it starts empty.

This module owns only the keeping; what a client is and when one may be reused is its
user's concern (:mod:`.reader.executor`, :mod:`.writer.common`).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Pool"]

logger = logging.getLogger(__name__)

_K = TypeVar("_K")
_C = TypeVar("_C")

_POOLS: weakref.WeakSet[Pool[object, object]] = weakref.WeakSet()


@dataclass(slots=True)
class _Idle(Generic[_K, _C]):
    key: _K
    client: _C
    since: float


class Pool(Generic[_K, _C]):
    """Idle clients by key, for reuse in one process (see the module docstring).

    Parameters
    ----------
    name
        What is pooled, for the log.
    close
        Closes one client (its errors are logged, never raised).
    capacity
        Most idle clients kept.
    idle_s
        Seconds an idle client is kept.
    """

    def __init__(
        self, name: str, close: Callable[[_C], None], *, capacity: int, idle_s: float
    ) -> None:
        self.name = name
        self._close = close
        self.capacity = capacity
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._idle: list[_Idle[_K, _C]] = []
        self._pid = os.getpid()
        _POOLS.add(self)  # type: ignore[arg-type]

    @contextmanager
    def use(self, key: _K, make: Callable[[], _C]) -> Iterator[_C]:
        """An idle client of ``key`` (or a new one from ``make``) for the ``with`` block.

        The client goes back to the pool when the block ends normally and is closed when
        it raises.
        """
        client = self._take(key)
        reused = client is not None
        if client is None:
            client = make()
        try:
            yield client
        except BaseException:
            self._close_quietly(client)
            raise
        self._give_back(key, client)
        logger.debug("%s %s", self.name, "reused" if reused else "created")

    def discard(self, key: _K) -> int:
        """Close every idle client of ``key``; return how many were closed."""
        with self._lock:
            gone = [i for i in self._idle if i.key == key]
            self._idle = [i for i in self._idle if i.key != key]
        for idle in gone:
            self._close_quietly(idle.client)
        return len(gone)

    def idle(self) -> int:
        """The number of idle clients kept (after closing the expired ones)."""
        self._expire()
        with self._lock:
            return len(self._idle)

    def kept(self) -> list[_C]:
        """The idle clients kept now (after closing the expired ones), oldest first."""
        self._expire()
        with self._lock:
            return [idle.client for idle in self._idle]

    def close_all(self) -> None:
        """Close every idle client (at the process's exit, or to start afresh)."""
        with self._lock:
            gone, self._idle = self._idle, []
        for idle in gone:
            self._close_quietly(idle.client)

    # -- internals -----------------------------------------------------------------------

    def _take(self, key: _K) -> _C | None:
        self._expire()
        with self._lock:
            for i in range(len(self._idle) - 1, -1, -1):  # the most recently returned first
                if self._idle[i].key == key:
                    return self._idle.pop(i).client
        return None

    def _give_back(self, key: _K, client: _C) -> None:
        with self._lock:
            self._idle.append(_Idle(key, client, time.monotonic()))
            over = self._idle[: max(0, len(self._idle) - self.capacity)]
            del self._idle[: len(over)]
        for idle in over:
            self._close_quietly(idle.client)

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            if os.getpid() != self._pid:  # a forked child: the parent's clients are not ours
                self._pid, self._idle = os.getpid(), []
                return
            gone = [i for i in self._idle if now - i.since > self.idle_s]
            self._idle = [i for i in self._idle if now - i.since <= self.idle_s]
        for idle in gone:
            self._close_quietly(idle.client)

    def _close_quietly(self, client: _C) -> None:
        try:
            self._close(client)
        except Exception as exc:  # noqa: BLE001 - closing is best effort, never the error
            logger.debug("closing a pooled %s failed: %s", self.name, exc)


@atexit.register
def _close_every_pool() -> None:
    for pool in list(_POOLS):
        if pool._pid == os.getpid():
            pool.close_all()
