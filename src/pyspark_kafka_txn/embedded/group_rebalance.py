"""The rebalance of a classic group: join phase, sync phase, deadlines, removals.

This module owns how a group moves through a rebalance once something asked for one
(Kafka's ``prepareRebalance`` / ``completeClassicGroupJoin`` and the expirations of
``GroupMetadataManager``): PreparingRebalance with the initial delay of an empty group
(extended while new members arrive, up to the rebalance timeout) or the rebalance
timeout; completing the join phase (removing the dynamic members that did not rejoin,
electing a leader, starting the next generation and answering the parked JoinGroups);
the sync deadline; session expiry; and removing a member, answering whatever it still
waits for. The requests that trigger it are :mod:`.membership`'s; the state it moves is
:mod:`.group_model`'s; the timers are :mod:`.group_timers`'.
"""

from __future__ import annotations

import logging

from pyspark_kafka_txn.embedded.group_model import (
    CAN_REBALANCE,
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    complete,
)
from pyspark_kafka_txn.embedded.group_timers import GroupTimers
from pyspark_kafka_txn.embedded.protocol import ErrorCode

logger = logging.getLogger(__name__)


class Rebalancer:
    """Drives the rebalances of every classic group.

    Parameters
    ----------
    groups
        The groups by id (shared with :class:`~.membership.GroupMembership`); a deadline
        of a group that is gone does nothing.
    timers
        The coordinator's timers.
    initial_rebalance_delay_ms
        ``group.initial.rebalance.delay.ms``.
    """

    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        timers: GroupTimers,
        initial_rebalance_delay_ms: int,
    ) -> None:
        self._groups = groups
        self._timers = timers
        self._initial_rebalance_delay_ms = initial_rebalance_delay_ms

    # --- sessions -----------------------------------------------------------------

    def heartbeat_after(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        """Expire ``member_id`` (member or pending member) unless re-armed within ``timeout_ms``."""
        gid = group.group_id
        self._timers.session(
            gid, member_id, timeout_ms, lambda: self._expire_heartbeat(gid, member_id)
        )

    def rearm_session(self, group: ClassicGroup, member: Member) -> None:
        """Restart ``member``'s session timeout (heartbeat, commit, join, assignment)."""
        self.heartbeat_after(group, member.member_id, member.session_timeout_ms)

    # --- rebalance ------------------------------------------------------------------

    def rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        """After a membership change: start a rebalance, or finish the running join phase
        if every member is in."""
        if group.state in CAN_REBALANCE:
            self.prepare_rebalance(group, "membership changed")
        else:
            self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """Finish the join phase once every member rejoined (not during the initial delay)."""
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is not GroupState.EMPTY  # initial delay still runs
            and group.all_joined()
        ):
            self.complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Enter PreparingRebalance: cancel the sync phase and arm the join deadline (the
        initial delay for an empty group)."""
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
            self.propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        self._timers.cancel_sync(group.group_id)
        initial = group.state is GroupState.EMPTY
        gid = group.group_id
        if initial:
            delay = self._initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timers.rebalance(
                gid, delay, lambda: self._initial_delay_over(gid, delay, remaining)
            )
        group.transition(GroupState.PREPARING_REBALANCE)
        logger.info(
            "group %s: preparing rebalance from generation %d (%s)",
            gid,
            group.generation,
            reason,
        )
        if not initial:
            if group.all_joined():
                self.complete_join(group)
            else:
                self._timers.rebalance(
                    gid, group.rebalance_timeout_ms(), lambda: self._join_timeout(gid)
                )

    def _initial_delay_over(self, group_id: str, delay: int, remaining: int) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            base = self._initial_rebalance_delay_ms
            new_delay = min(base, remaining)
            new_remaining = max(remaining - delay, 0)
            self._timers.rebalance(
                group_id,
                new_delay,
                lambda: self._initial_delay_over(group_id, new_delay, new_remaining),
            )
        else:
            self.complete_join(group)

    def _join_timeout(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation and answer the parked JoinGroups."""
        gid = group.group_id
        self._timers.cancel_rebalance(gid)
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        gone = [
            m.member_id
            for m in group.members.values()
            if m.join_future is None and m.group_instance_id is None
        ]
        for member_id in gone:
            self.drop_member(group, member_id)
        if gone:
            logger.info("group %s: removed members that did not rejoin: %s", gid, gone)
        if not group.elect_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them (or for
            # their sessions to expire).
            self._timers.rebalance(
                gid, group.rebalance_timeout_ms(), lambda: self._join_timeout(gid)
            )
            return
        group.init_next_generation()
        if not group.members:
            logger.info("group %s: generation %d is empty", gid, group.generation)
            return
        logger.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            gid,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in list(group.members.values()):
            leader = member.member_id == group.leader_id
            complete(member.join_future, group.join_result(member.member_id, with_members=leader))
            member.join_future = None
            self.rearm_session(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation
        self._timers.sync(
            gid,
            group.rebalance_timeout_ms(),
            lambda: self._sync_timeout(gid, generation),
        )

    def _sync_timeout(self, group_id: str, generation: int) -> None:
        group = self._groups.get(group_id)
        if group is None or group.generation != generation:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self.drop_member(group, member_id)
        self.prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def drop_member(self, group: ClassicGroup, member_id: str) -> Member | None:
        """Remove a member, answering whatever it still waits for."""
        self._timers.cancel_session(group.group_id, member_id)
        member = group.remove(member_id)
        if member is not None:
            complete(
                member.join_future, JoinResult(error=ErrorCode.unknown_member_id, member_id="")
            )
            member.join_future = None
            complete(member.sync_future, SyncResult(error=ErrorCode.unknown_member_id))
            member.sync_future = None
        return member

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return
        if member_id in group.pending_join:
            logger.info("group %s: pending member %s expired", group_id, member_id)
            group.pending_join.discard(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.all_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        logger.info("group %s: member %s session expired", group_id, member_id)
        self.drop_member(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.rebalance_or_complete_join(group)
        elif group.state is GroupState.PREPARING_REBALANCE and group.all_joined():
            self.complete_join(group)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        """Answer every parked SyncGroup with its assignment, or with ``error``."""
        ok = error is ErrorCode.none
        for member in group.members.values():
            result = SyncResult(
                error=error,
                assignment=member.assignment,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
            )
            if complete(member.sync_future, result):
                self.rearm_session(group, member)
            member.sync_future = None

    def synced(self, group: ClassicGroup, member_id: str) -> None:
        """``member_id`` sent its SyncGroup; the sync deadline ends when all have."""
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel_sync(group.group_id)
