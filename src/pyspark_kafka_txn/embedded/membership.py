"""Classic consumer-group membership (JoinGroup / SyncGroup / Heartbeat / LeaveGroup).

Only the offset-commit validation hook exists so far: groups without members accept
commits with generation -1 and an empty member id (assign-only consumers), as Kafka's
"simple" groups do; any commit naming a generation or member is rejected until the
rebalance protocol is implemented.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark_kafka_txn.embedded.protocol import ErrorCode

if TYPE_CHECKING:
    from pyspark_kafka_txn.embedded.cluster import Cluster


class GroupMembership:
    """Membership state of classic groups."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def validate_offset_commit(
        self,
        group: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        *,
        transactional: bool,
    ) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateOffsetCommit`` for a group with no members."""
        if generation < 0 and not member_id and instance_id is None:
            return ErrorCode.none
        if transactional:
            return ErrorCode.illegal_generation
        return ErrorCode.unknown_member_id if member_id else ErrorCode.illegal_generation
