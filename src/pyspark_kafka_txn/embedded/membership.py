"""Classic consumer-group membership: the JoinGroup / SyncGroup rebalance protocol.

Follows Kafka 4.x's classic group coordinator (``GroupMetadataManager.classicGroup*`` and
``ClassicGroup``; reference §4.4):

* states Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead, which
  only a deleted group reaches; nothing here deletes groups);
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

Timers are ``loop.call_later`` handles keyed like Kafka's coordinator timer (scheduling a
key again replaces it), so no periodic tick is needed. Group metadata is not persisted:
after a restart of the embedded cluster only committed offsets survive, and groups
rebalance from scratch. A group that only has committed offsets (a "simple" group of
assign-only consumers) exists in the Empty state, as in Kafka.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from pyspark_kafka_txn.embedded.groups import GroupOffsets
from pyspark_kafka_txn.embedded.protocol import ErrorCode

logger = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # group.coordinator new-member join timeout
CLASSIC_GROUP_TYPE = "classic"
T = TypeVar("T")

Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols: (name, metadata) in preference order."""


class GroupState(enum.Enum):
    """States of a classic group, with Kafka's names."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_CAN_REBALANCE = frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY})


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinRequest:
    """A JoinGroup request, version-independent."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinResult:
    """What a JoinGroup answer carries (members only for the leader)."""

    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncResult:
    """What a SyncGroup answer carries."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberOutcome:
    """One member's result in a LeaveGroup answer."""

    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    """A member as DescribeGroups reports it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    """A group as DescribeGroups / ListGroups report it (``None`` state: not found)."""

    group_id: str
    state: GroupState | None
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(eq=False, slots=True)
class Member:
    """A member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)

    @property
    def has_satisfied_heartbeat(self) -> bool:
        # Members parked in JoinGroup/SyncGroup cannot heartbeat, so they do not expire
        # (new members do: they may have given up on their first JoinGroup).
        return not self.is_new and (self.join_future is not None or self.sync_future is not None)


@dataclass(eq=False, slots=True)
class ClassicGroup:
    """One classic group's membership state."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False

    # --- queries ------------------------------------------------------------------

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_future is not None)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            mine = {name for name, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        wanted = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(wanted)
        return self.protocol_type == protocol_type and bool(wanted & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def member_list(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateMember``."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    # --- updates ------------------------------------------------------------------

    def transition(self, state: GroupState) -> None:
        self.previous_state, self.state = self.state, state

    def add(self, member: Member, future: asyncio.Future[JoinResult] | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_future = future
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did (False: none did)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_future is not None:
            return True
        for member in self.members.values():
            if member.join_future is not None:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)
        self.pending_sync.clear()


def _complete(future: asyncio.Future[T] | None, result: T) -> bool:
    """Answer a parked request unless it was answered already."""
    if future is None or future.done():
        return False
    future.set_result(result)
    return True


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
        self._initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._report_error = report_error
        self.groups: dict[str, ClassicGroup] = {}
        self._timers: dict[tuple[str, ...], asyncio.TimerHandle] = {}

    # --- timers -------------------------------------------------------------------

    def _schedule(self, key: tuple[str, ...], delay_ms: int, fn: Callable[[], None]) -> None:
        self._cancel(key)
        self._timers[key] = self._loop.call_later(delay_ms / 1000, self._fire, key, fn)

    def _cancel(self, key: tuple[str, ...]) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, key: tuple[str, ...], fn: Callable[[], None]) -> None:
        self._timers.pop(key, None)
        try:
            fn()
        except Exception as exc:  # a bug here must not kill the loop; tests check this list
            self._report_error(f"group timer {key}: {exc!r}")
            logger.exception("group timer %s failed", key)

    def _heartbeat_after(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        gid = group.group_id
        self._schedule(
            ("heartbeat", gid, member_id),
            timeout_ms,
            lambda: self._expire_heartbeat(gid, member_id),
        )

    def _rearm_session(self, group: ClassicGroup, member: Member) -> None:
        self._heartbeat_after(group, member.member_id, member.session_timeout_ms)

    def _new_future(self) -> asyncio.Future[JoinResult]:
        return self._loop.create_future()

    def close(self) -> None:
        """Stop the timers and answer parked requests with NOT_COORDINATOR (shutdown)."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for group in self.groups.values():
            for member in group.members.values():
                _complete(
                    member.join_future,
                    JoinResult(error=ErrorCode.not_coordinator, member_id=member.member_id),
                )
                _complete(member.sync_future, SyncResult(error=ErrorCode.not_coordinator))
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
        """Whether ``group_id``'s live members consume ``topic`` (OffsetDelete's check).

        An empty group subscribes to nothing. For the consumer protocol the members'
        subscriptions tell; for any other protocol type the topics are unknown, so a
        group with members counts as subscribed (refusing is the safe answer).
        """
        group = self.group(group_id)
        if group is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return False
        if group.protocol_type != "consumer":
            return True
        for member in group.members.values():
            for _, metadata in member.protocols:
                if topic in _subscribed_topics(metadata):
                    return True
        return False

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
            self._heartbeat_after(group, new_id, req.session_timeout_ms)
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
            self._rebalance_or_complete_join(group)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.protocols == req.protocols:
                # Lost JoinGroup answer: give the current generation again.
                leader = member_id == group.leader_id
                future.set_result(self._join_result(group, member_id, with_members=leader))
            else:
                self._update_member(member, req, future)
                self._rebalance_or_complete_join(group)
        elif state is GroupState.STABLE:
            if member_id == group.leader_id or member.protocols != req.protocols:
                # A rejoining leader forces a rebalance (e.g. topic metadata changed).
                self._update_member(member, req, future)
                self._rebalance_or_complete_join(group)
            else:
                future.set_result(self._join_result(group, member_id, with_members=False))
        else:
            future.set_result(JoinResult(error=ErrorCode.unknown_member_id, member_id=member_id))

    def _join_result(
        self, group: ClassicGroup, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinResult:
        return JoinResult(
            error=ErrorCode.none,
            member_id=member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.member_list() if with_members else (),
            skip_assignment=skip,
        )

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
        self._heartbeat_after(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        logger.info("group %s: member %s joins", group.group_id, member_id)
        self._rebalance_or_complete_join(group)

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
        _complete(old.join_future, JoinResult(error=ErrorCode.fenced_instance_id, member_id=old_id))
        _complete(old.sync_future, SyncResult(error=ErrorCode.fenced_instance_id))
        self._cancel(("heartbeat", group.group_id, old_id))
        member = Member(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        group.static_members[req.group_instance_id] = new_id
        self._rearm_session(group, member)
        self._update_member(member, req, future)
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: the static member takes over its old assignment.
                if req.version >= 9:
                    leader = new_id == group.leader_id
                    result = self._join_result(group, new_id, with_members=leader, skip=leader)
                else:
                    result = JoinResult(
                        error=ErrorCode.none,
                        member_id=new_id,
                        generation=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=previous_leader or "",
                    )
                _complete(member.join_future, result)
                member.join_future = None
            else:
                self._rebalance_or_complete_join(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, "static member rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join_phase(group)

    # --- rebalance ------------------------------------------------------------------

    def _rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.state in _CAN_REBALANCE:
            self._prepare_rebalance(group, "membership changed")
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is not GroupState.EMPTY  # initial delay still runs
            and group.all_joined()
        ):
            self._complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        self._cancel(("sync", group.group_id))
        initial = group.state is GroupState.EMPTY
        gid = group.group_id
        if initial:
            delay = self._initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule(
                ("join", gid), delay, lambda: self._initial_delay_over(gid, delay, remaining)
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
                self._complete_join(group)
            else:
                self._schedule(
                    ("join", gid), group.rebalance_timeout_ms(), lambda: self._join_timeout(gid)
                )

    def _initial_delay_over(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            base = self._initial_rebalance_delay_ms
            new_delay = min(base, remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(
                ("join", group_id),
                new_delay,
                lambda: self._initial_delay_over(group_id, new_delay, new_remaining),
            )
        else:
            self._complete_join(group)

    def _join_timeout(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self._cancel(("join", gid))
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        gone = [
            m.member_id
            for m in group.members.values()
            if m.join_future is None and m.group_instance_id is None
        ]
        for member_id in gone:
            self._drop_member(group, member_id)
        if gone:
            logger.info("group %s: removed members that did not rejoin: %s", gid, gone)
        if not group.elect_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them (or for
            # their sessions to expire).
            self._schedule(
                ("join", gid), group.rebalance_timeout_ms(), lambda: self._join_timeout(gid)
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
            _complete(
                member.join_future, self._join_result(group, member.member_id, with_members=leader)
            )
            member.join_future = None
            self._rearm_session(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation
        self._schedule(
            ("sync", gid),
            group.rebalance_timeout_ms(),
            lambda: self._sync_timeout(gid, generation),
        )

    def _sync_timeout(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self._drop_member(group, member_id)
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _drop_member(self, group: ClassicGroup, member_id: str) -> Member | None:
        """Remove a member, answering whatever it still waits for."""
        self._cancel(("heartbeat", group.group_id, member_id))
        member = group.remove(member_id)
        if member is not None:
            _complete(
                member.join_future, JoinResult(error=ErrorCode.unknown_member_id, member_id="")
            )
            member.join_future = None
            _complete(member.sync_future, SyncResult(error=ErrorCode.unknown_member_id))
            member.sync_future = None
        return member

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return
        if member_id in group.pending_join:
            logger.info("group %s: pending member %s expired", group_id, member_id)
            group.pending_join.discard(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.all_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        logger.info("group %s: member %s session expired", group_id, member_id)
        self._drop_member(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._rebalance_or_complete_join(group)
        elif group.state is GroupState.PREPARING_REBALANCE and group.all_joined():
            self._complete_join(group)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in group.members.values():
            result = SyncResult(
                error=error,
                assignment=member.assignment,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
            )
            if _complete(member.sync_future, result):
                self._rearm_session(group, member)
            member.sync_future = None

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
            _inconsistent(protocol_type, group.protocol_type)
            or _inconsistent(protocol_name, group.protocol_name)
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
            self._synced(group, member_id)
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
                self._propagate_assignment(group, ErrorCode.none)
                group.transition(GroupState.STABLE)
                logger.info("group %s: generation %d is stable", group_id, group.generation)
        else:  # Stable: the assignment is already known
            self._synced(group, member_id)
            future.set_result(
                SyncResult(
                    error=ErrorCode.none,
                    assignment=member.assignment,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                )
            )
        return future

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel(("sync", group.group_id))

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
        self._rearm_session(group, group.members[member_id])
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
                    self._drop_member(group, target)
            elif member_id in group.pending_join:
                group.pending_join.discard(member_id)
                self._cancel(("heartbeat", group_id, member_id))
            else:
                error = group.validate_member(member_id, instance_id)
                if error is ErrorCode.none:
                    self._drop_member(group, member_id)
            if error is ErrorCode.none:
                left = True
                logger.info("group %s: member %s left", group_id, member_id or instance_id)
            outcomes.append(
                MemberOutcome(member_id=member_id, group_instance_id=instance_id, error=error)
            )
        if left:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._rebalance_or_complete_join(group)
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        return ErrorCode.none, outcomes

    # --- Describe / List ----------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        """The group as DescribeGroups reports it."""
        group = self.group(group_id)
        if group is None:
            return GroupDescription(group_id=group_id, state=None)
        stable = group.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(group.protocol_name) if stable else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id=group_id,
            state=group.state,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=members,
        )

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
            self._rearm_session(group, member)
        return ErrorCode.none


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (every version starts with them)."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2 : pos + 2 + length].decode())
            pos += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
