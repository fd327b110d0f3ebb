"""Deadlines of the classic group coordinator: sessions, rebalances, SyncGroup.

This module owns the timers of :mod:`.membership` and nothing else: one-shot
``loop.call_later`` handles keyed like Kafka's coordinator timer (scheduling a key
again replaces its timer), so no periodic tick is needed. Three kinds of deadline
exist, each named by a pair of methods:

* a member's **session** (``heartbeat`` key): re-armed by heartbeats, commits, completed
  joins and delivered assignments; also bounds how long a new or pending member may
  wait for its JoinGroup;
* a group's **rebalance** (``join`` key): the initial rebalance delay of an empty group,
  or the rebalance timeout of the join phase;
* a group's **sync** (``sync`` key): the rebalance timeout for the members' SyncGroup.

What a deadline does is the coordinator's callback; a callback that raises is recorded
as an internal error (the tests check that list) instead of killing the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: How long a new member's parked JoinGroup may wait (group coordinator new-member
#: join timeout).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

TimerKey = tuple[str, ...]


class GroupTimers:
    """The keyed timers of every classic group, on the broker's event loop.

    Parameters
    ----------
    call_later
        ``loop.call_later`` of the broker's event loop.
    report_error
        Records a failed callback as an internal error.
    """

    def __init__(
        self,
        call_later: Callable[..., asyncio.TimerHandle],
        report_error: Callable[[str], None],
    ) -> None:
        self._call_later = call_later
        self._report_error = report_error
        self._timers: dict[TimerKey, asyncio.TimerHandle] = {}

    # --- named deadlines ----------------------------------------------------------

    def session(self, group_id: str, member_id: str, delay_ms: int, fn: Callable[[], None]) -> None:
        """(Re-)arm a member's session deadline."""
        self.schedule(("heartbeat", group_id, member_id), delay_ms, fn)

    def cancel_session(self, group_id: str, member_id: str) -> None:
        self.cancel(("heartbeat", group_id, member_id))

    def rebalance(self, group_id: str, delay_ms: int, fn: Callable[[], None]) -> None:
        """Arm the end of a group's join phase (initial delay or rebalance timeout)."""
        self.schedule(("join", group_id), delay_ms, fn)

    def cancel_rebalance(self, group_id: str) -> None:
        self.cancel(("join", group_id))

    def sync(self, group_id: str, delay_ms: int, fn: Callable[[], None]) -> None:
        """Arm the deadline of a generation's SyncGroups."""
        self.schedule(("sync", group_id), delay_ms, fn)

    def cancel_sync(self, group_id: str) -> None:
        self.cancel(("sync", group_id))

    # --- keyed timers -------------------------------------------------------------

    def schedule(self, key: TimerKey, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` in ``delay_ms``, replacing the timer of ``key``."""
        self.cancel(key)
        self._timers[key] = self._call_later(delay_ms / 1000, self._fire, key, fn)

    def cancel(self, key: TimerKey) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: TimerKey, fn: Callable[[], Any]) -> None:
        self._timers.pop(key, None)
        try:
            fn()
        except Exception as exc:  # a bug here must not kill the loop; tests check this list
            self._report_error(f"group timer {key}: {exc!r}")
            logger.exception("group timer %s failed", key)

    def close(self) -> None:
        """Cancel every timer (shutdown)."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
