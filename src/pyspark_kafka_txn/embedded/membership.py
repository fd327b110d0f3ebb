"""The classic group coordinator: the JoinGroup / SyncGroup rebalance protocol.

Follows Kafka 4.x's classic group coordinator (``GroupMetadataManager.classicGroup*`` and
``ClassicGroup``; reference §4.4):

* states Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead, which
  only a group deleted by DeleteGroups reaches);
* a dynamic member joining with JoinGroup v4+ and no member id gets MEMBER_ID_REQUIRED
  with a generated id and stays *pending* (expiring after its session timeout) until
  it joins again with that id;
* the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``,
  extended while new members keep arriving, up to the group's rebalance timeout;
  later rebalances complete as soon as every member has rejoined, or after the
  rebalance timeout, removing the dynamic members that did not rejoin;
* JoinGroup answers are parked (asyncio futures) until the join phase completes; the
  leader receives every member's metadata for the selected protocol (the one supported
  by all members that gets the most first-choice votes); followers' SyncGroup answers
  are parked until the leader's SyncGroup brings the assignment;
* sessions: heartbeats, commits, completed joins and delivered assignments re-arm the
  member's session timer; an expired member is removed and the group rebalances;
  members awaiting a JoinGroup or SyncGroup answer are not expired (Kafka's
  ``hasSatisfiedHeartbeat``), except new members, whose parked JoinGroup is answered
  with UNKNOWN_MEMBER_ID after five minutes;
* static members (``group.instance.id``) keep their identity across restarts: a
  rejoin with an unknown member id replaces the old member id (fencing the old one
  with FENCED_INSTANCE_ID) and only triggers a rebalance when needed.

This module owns what each group API does to a group: JoinGroup (new, pending, known
and static members), SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups,
DeleteGroups and the validation of offset commits. The group state is
:mod:`.group_model`'s; how a rebalance proceeds once started (join phase, sync phase,
expiries) is :mod:`.group_rebalance`'s; the deadlines are :mod:`.group_timers`'
(``loop.call_later`` handles keyed like Kafka's coordinator timer, so no periodic tick
is needed). The names the handlers use (:class:`GroupState`, :class:`JoinRequest`,
:class:`JoinResult`, :class:`SyncResult`, :class:`MemberOutcome`,
``CLASSIC_GROUP_TYPE``) are re-exported here.

Group metadata is not persisted: after a restart of the embedded cluster only committed
offsets survive, and groups rebalance from scratch. A group that only has committed
offsets (a "simple" group of assign-only consumers) exists in the Empty state, as in Kafka.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable

from pyspark_kafka_txn.embedded.group_model import (
    CLASSIC_GROUP_TYPE,
    ClassicGroup,
    DescribedMember,
    GroupDescription,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    MemberOutcome,
    SyncResult,
    complete,
    inconsistent,
)
from pyspark_kafka_txn.embedded.group_rebalance import Rebalancer
from pyspark_kafka_txn.embedded.group_timers import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupTimers
from pyspark_kafka_txn.embedded.groups import GroupOffsets
from pyspark_kafka_txn.embedded.protocol import ErrorCode

__all__ = [
    "CLASSIC_GROUP_TYPE",
    "ClassicGroup",
    "DescribedMember",
    "GroupDescription",
    "GroupMembership",
    "GroupState",
    "JoinRequest",
    "JoinResult",
    "Member",
    "MemberOutcome",
    "SyncResult",
]

logger = logging.getLogger(__name__)


class GroupMembership:
    """Membership state of every classic group, owned by the broker's event loop.

    Parameters
    ----------
    loop
        The broker's event loop: timers (``call_later``) and parked answers
        (``create_future``).
    offsets
        The committed and pending offsets of every group (a group with offsets exists).
    initial_rebalance_delay_ms
        ``group.initial.rebalance.delay.ms``.
    report_error
        Records an internal error (a failed timer callback) for the tests to check.
    """

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        offsets: GroupOffsets,
        initial_rebalance_delay_ms: int,
        report_error: Callable[[str], None],
    ) -> None:
        self._loop = loop
        self._offsets = offsets
        self.groups: dict[str, ClassicGroup] = {}
        self._timers = GroupTimers(loop.call_later, report_error)
        self._rebalance = Rebalancer(self.groups, self._timers, initial_rebalance_delay_ms)

    def _new_future(self) -> asyncio.Future[JoinResult]:
        return self._loop.create_future()

    def close(self) -> None:
        """Stop the timers and answer parked requests with NOT_COORDINATOR (shutdown)."""
        self._timers.close()
        for group in self.groups.values():
            for member in group.members.values():
                complete(
                    member.join_future,
                    JoinResult(error=ErrorCode.not_coordinator, member_id=member.member_id),
                )
                complete(member.sync_future, SyncResult(error=ErrorCode.not_coordinator))
                member.join_future = member.sync_future = None

    # --- lookup -------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The group, if it exists (a group with committed offsets always does)."""
        group = self.groups.get(group_id)
        if group is None and self._has_offsets(group_id):
            group = self.groups[group_id] = ClassicGroup(group_id)
        return group

    def _has_offsets(self, group_id: str) -> bool:
        offsets = self._offsets
        return bool(offsets.committed.get(group_id)) or bool(offsets.pending.get(group_id))

    def delete(self, group_id: str) -> ErrorCode:
        """Delete an empty group and its offsets (DeleteGroups): Kafka's error, or NONE."""
        group = self.group(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if group.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        group.transition(GroupState.DEAD)
        del self.groups[group_id]
        self._offsets.delete_group(group_id)
        return ErrorCode.none

    def subscribes_to(self, group_id: str, topic: str) -> bool:
        """Whether ``group_id``'s live members consume ``topic`` (OffsetDelete's check,
        :meth:`ClassicGroup.subscribes_to`)."""
        group = self.group(group_id)
        return group is not None and group.subscribes_to(topic)

    def group_ids(self) -> list[str]:
        offsets = self._offsets
        ids = set(self.groups)
        ids.update(g for g, o in offsets.committed.items() if o)
        ids.update(g for g, o in offsets.pending.items() if o)
        return sorted(ids)

    # --- JoinGroup ----------------------------------------------------------------

    def join(self, req: JoinRequest) -> asyncio.Future[JoinResult]:
        """Handle a JoinGroup; the future completes when the answer is due."""
        future = self._new_future()
        unknown = req.member_id == ""
        group = self.group(req.group_id)
        if group is None:
            if not unknown:
                future.set_result(
                    JoinResult(error=ErrorCode.unknown_member_id, member_id=req.member_id)
                )
                return future
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)
        if unknown:
            self._join_new_member(group, req, future)
        else:
            self._join_existing_member(group, req, future)
        return future

    def _join_new_member(
        self, group: ClassicGroup, req: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        names = [name for name, _ in req.protocols]
        if group.state is GroupState.DEAD:
            future.set_result(JoinResult(error=ErrorCode.coordinator_not_available, member_id=""))
            return
        if not group.supports_protocols(req.protocol_type, names):
            future.set_result(JoinResult(error=ErrorCode.inconsistent_group_protocol, member_id=""))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                logger.info(
                    "group %s: static member %s rejoins, replacing member id %s",
                    group.group_id,
                    req.group_instance_id,
                    old_id,
                )
                self._replace_static_member(group, req, old_id, new_id, future)
            else:
                self._add_member(group, req, new_id, future)
        elif req.version >= 4:
            # KIP-394: hand out the id first; the member exists only once it rejoins.
            group.pending_join.add(new_id)
            self._rebalance.heartbeat_after(group, new_id, req.session_timeout_ms)
            future.set_result(JoinResult(error=ErrorCode.member_id_required, member_id=new_id))
        else:
            self._add_member(group, req, new_id, future)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = req.member_id
        names = [name for name, _ in req.protocols]
        if group.state is GroupState.DEAD:
            future.set_result(
                JoinResult(error=ErrorCode.coordinator_not_available, member_id=member_id)
            )
            return
        if not group.supports_protocols(req.protocol_type, names):
            future.set_result(
                JoinResult(error=ErrorCode.inconsistent_group_protocol, member_id=member_id)
            )
            return
        if member_id in group.pending_join:
            if req.group_instance_id is not None:
                # Kafka raises IllegalStateException here (pending members are dynamic).
                future.set_result(
                    JoinResult(error=ErrorCode.unknown_server_error, member_id=member_id)
                )
                return
            self._add_member(group, req, member_id, future)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.none:
            future.set_result(JoinResult(error=error, member_id=member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, req, future)
            self._rebalance.rebalance_or_complete_join(group)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.protocols == req.protocols:
                # Lost JoinGroup answer: give the current generation again.
                leader = member_id == group.leader_id
                future.set_result(group.join_result(member_id, with_members=leader))
            else:
                self._update_member(member, req, future)
                self._rebalance.rebalance_or_complete_join(group)
        elif state is GroupState.STABLE:
            if member_id == group.leader_id or member.protocols != req.protocols:
                # A rejoining leader forces a rebalance (e.g. topic metadata changed).
                self._update_member(member, req, future)
                self._rebalance.rebalance_or_complete_join(group)
            else:
                future.set_result(group.join_result(member_id, with_members=False))
        else:
            future.set_result(JoinResult(error=ErrorCode.unknown_member_id, member_id=member_id))

    def _add_member(
        self,
        group: ClassicGroup,
        req: JoinRequest,
        member_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
        )
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is GroupState.EMPTY
        ):
            group.new_member_added = True
        group.add(member, future)
        # A parked JoinGroup cannot heartbeat: bound how long a new member may wait.
        self._rebalance.heartbeat_after(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        logger.info("group %s: member %s joins", group.group_id, member_id)
        self._rebalance.rebalance_or_complete_join(group)

    @staticmethod
    def _update_member(
        member: Member,
        req: JoinRequest,
        future: asyncio.Future[JoinResult] | None,
    ) -> None:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_future = future

    def _replace_static_member(
        self,
        group: ClassicGroup,
        req: JoinRequest,
        old_id: str,
        new_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        assert req.group_instance_id is not None
        previous_leader = group.leader_id
        old = group.members.pop(old_id)
        complete(old.join_future, JoinResult(error=ErrorCode.fenced_instance_id, member_id=old_id))
        complete(old.sync_future, SyncResult(error=ErrorCode.fenced_instance_id))
        self._timers.cancel_session(group.group_id, old_id)
        # The old member under its new id, with no JoinGroup/SyncGroup parked.
        member = dataclasses.replace(
            old, member_id=new_id, join_future=None, sync_future=None, is_new=False
        )
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        group.static_members[req.group_instance_id] = new_id
        self._rebalance.rearm_session(group, member)
        self._update_member(member, req, future)
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: the static member takes over its old assignment.
                if req.version >= 9:
                    leader = new_id == group.leader_id
                    result = group.join_result(new_id, with_members=leader, skip=leader)
                else:
                    result = JoinResult(
                        error=ErrorCode.none,
                        member_id=new_id,
                        generation=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=previous_leader or "",
                    )
                complete(member.join_future, result)
                member.join_future = None
            else:
                self._rebalance.rebalance_or_complete_join(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            self._rebalance.prepare_rebalance(
                group, "static member rejoined during CompletingRebalance"
            )
        else:
            self._rebalance.maybe_complete_join_phase(group)

    # --- SyncGroup ----------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        """Handle a SyncGroup; the future completes when the assignment is known."""
        future: asyncio.Future[SyncResult] = self._loop.create_future()
        group = self.group(group_id)
        if group is None or group.state is GroupState.EMPTY:
            future.set_result(SyncResult(error=ErrorCode.unknown_member_id))
            return future
        error = ErrorCode.none
        if group.state is GroupState.DEAD:
            error = ErrorCode.coordinator_not_available
        else:
            error = group.validate_member(member_id, instance_id)
        if error is ErrorCode.none and generation != group.generation:
            error = ErrorCode.illegal_generation
        if error is ErrorCode.none and (
            inconsistent(protocol_type, group.protocol_type)
            or inconsistent(protocol_name, group.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is not ErrorCode.none:
            future.set_result(SyncResult(error=error))
            return future
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            future.set_result(SyncResult(error=ErrorCode.rebalance_in_progress))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.sync_future = future
            self._rebalance.synced(group, member_id)
            if member_id == group.leader_id:
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    logger.warning(
                        "group %s: empty assignment for %s in generation %d",
                        group_id,
                        missing,
                        group.generation,
                    )
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                self._rebalance.propagate_assignment(group, ErrorCode.none)
                group.transition(GroupState.STABLE)
                logger.info("group %s: generation %d is stable", group_id, group.generation)
        else:  # Stable: the assignment is already known
            self._rebalance.synced(group, member_id)
            future.set_result(
                SyncResult(
                    error=ErrorCode.none,
                    assignment=member.assignment,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                )
            )
        return future

    # --- Heartbeat / LeaveGroup ---------------------------------------------------

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """Handle a Heartbeat."""
        group = self.group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, instance_id)
        if error is not ErrorCode.none:
            return error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        self._rebalance.rearm_session(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[MemberOutcome]]:
        """Handle a LeaveGroup of ``(member_id, group_instance_id)`` identities."""
        group = self.group(group_id)
        if group is None:
            return ErrorCode.none, [
                MemberOutcome(member_id=m, group_instance_id=i, error=ErrorCode.unknown_member_id)
                for m, i in members
            ]
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available, []
        outcomes = []
        left = False
        for member_id, instance_id in members:
            error = ErrorCode.none
            if not member_id:
                # Administrative removal by group.instance.id.
                target = group.static_members.get(instance_id) if instance_id else None
                if target is None:
                    error = ErrorCode.unknown_member_id
                else:
                    self._rebalance.drop_member(group, target)
            elif member_id in group.pending_join:
                group.pending_join.discard(member_id)
                self._timers.cancel_session(group_id, member_id)
            else:
                error = group.validate_member(member_id, instance_id)
                if error is ErrorCode.none:
                    self._rebalance.drop_member(group, member_id)
            if error is ErrorCode.none:
                left = True
                logger.info("group %s: member %s left", group_id, member_id or instance_id)
            outcomes.append(
                MemberOutcome(member_id=member_id, group_instance_id=instance_id, error=error)
            )
        if left:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._rebalance.rebalance_or_complete_join(group)
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._rebalance.maybe_complete_join_phase(group)
        return ErrorCode.none, outcomes

    # --- Describe / List ----------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        """The group as DescribeGroups reports it."""
        group = self.group(group_id)
        if group is None:
            return GroupDescription(group_id=group_id, state=None)
        return group.describe()

    def list_groups(self, owned: Callable[[str], bool]) -> list[GroupDescription]:
        """Every group for which ``owned(group_id)`` holds (no members listed)."""
        out = []
        for group_id in self.group_ids():
            if not owned(group_id):
                continue
            group = self.group(group_id)
            assert group is not None
            out.append(
                GroupDescription(
                    group_id=group_id, state=group.state, protocol_type=group.protocol_type or ""
                )
            )
        return out

    # --- offset commits -----------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        *,
        transactional: bool,
    ) -> ErrorCode:
        """Kafka's ``validateOffsetCommit`` / ``validateTransactionalOffsetCommit``.

        Returns GROUP_ID_NOT_FOUND for a plain commit naming a generation of a group
        that does not exist; OffsetCommit below v9 reports that as ILLEGAL_GENERATION.
        A valid plain commit re-arms the member's session, as a heartbeat does.
        """
        group = self.group(group_id)
        if group is None:
            if generation >= 0:
                return (
                    ErrorCode.illegal_generation if transactional else ErrorCode.group_id_not_found
                )
            # A "simple" group of assign-only consumers or admin commits.
            self.groups[group_id] = ClassicGroup(group_id)
            return ErrorCode.none
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.none
        if generation >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.none:
                return error
            if generation != group.generation:
                return ErrorCode.illegal_generation
        elif not transactional:
            # Generation -1 without a member: only allowed while the group has no members.
            return ErrorCode.unknown_member_id
        if transactional:
            return ErrorCode.none
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        member = group.members.get(member_id)
        if member is not None and group.state in (
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
        ):
            self._rebalance.rearm_session(group, member)
        return ErrorCode.none
