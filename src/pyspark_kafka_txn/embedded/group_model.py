"""The classic consumer-group model: groups, members and the answers they get.

This module owns the *state* of a classic group (Kafka's ``ClassicGroup`` and
``ClassicGroupMember``): its :class:`GroupState`, generation, selected protocol, leader,
members, static-member mapping and the sets of members expected to join or sync; the
version-independent request and answer records the handlers translate from and to
(:class:`JoinRequest`, :class:`JoinResult`, :class:`SyncResult`, :class:`MemberOutcome`,
:class:`GroupDescription`); and the queries a group answers about itself (protocol
selection, member validation, DescribeGroups, OffsetDelete's subscription check).

It schedules nothing and knows no other group: the rebalance protocol that drives the
state lives in :mod:`.membership`, its deadlines in :mod:`.group_timers`.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from pyspark_kafka_txn.embedded.protocol import ErrorCode

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


#: The states from which a membership change starts a rebalance.
CAN_REBALANCE = frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY})


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

    def describe(self) -> GroupDescription:
        """The group as DescribeGroups reports it."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(self.protocol_name) if stable else b"",
                assignment=m.assignment,
            )
            for m in self.members.values()
        )
        return GroupDescription(
            group_id=self.group_id,
            state=self.state,
            protocol_type=self.protocol_type or "",
            protocol_data=(self.protocol_name or "") if stable else "",
            members=members,
        )

    def subscribes_to(self, topic: str) -> bool:
        """Whether the live members consume ``topic`` (OffsetDelete's check).

        An empty group subscribes to nothing. For the consumer protocol the members'
        subscriptions tell; for any other protocol type the topics are unknown, so a
        group with members counts as subscribed (refusing is the safe answer).
        """
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return False
        if self.protocol_type != "consumer":
            return True
        for member in self.members.values():
            for _, metadata in member.protocols:
                if topic in subscribed_topics(metadata):
                    return True
        return False

    def join_result(self, member_id: str, *, with_members: bool, skip: bool = False) -> JoinResult:
        """A successful JoinGroup answer of the current generation (members for the leader)."""
        return JoinResult(
            error=ErrorCode.none,
            member_id=member_id,
            generation=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self.member_list() if with_members else (),
            skip_assignment=skip,
        )

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


def complete(future: asyncio.Future[T] | None, result: T) -> bool:
    """Answer a parked request unless it was answered already."""
    if future is None or future.done():
        return False
    future.set_result(result)
    return True


def inconsistent(requested: str | None, current: str | None) -> bool:
    """A requested protocol type/name that differs from the group's (both known)."""
    return requested is not None and current is not None and requested != current


def subscribed_topics(metadata: bytes) -> set[str]:
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
