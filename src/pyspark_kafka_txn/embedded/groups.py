"""The group coordinator's offset store: committed offsets and transactional offsets.

Follows Kafka 4.x's ``OffsetMetadataManager`` (reference §4.2-4.3):

* ``TxnOffsetCommit`` stages offsets per (group, producer id); they are invisible to
  OffsetFetch until the transaction's COMMIT marker reaches the group's
  ``__consumer_offsets`` partition, and dropped by an ABORT marker;
* on commit a staged offset wins only if it was written after the currently committed
  one (a plain OffsetCommit written later keeps precedence);
* OffsetFetch with RequireStable reports UNSTABLE_OFFSET_COMMIT for partitions with
  staged offsets of an open transaction.

Group membership (the classic rebalance protocol) lives in :mod:`.membership`; this
module asks it whether a commit's generation and member id are valid.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark_kafka_txn.embedded.protocol import ErrorCode
from pyspark_kafka_txn.wire import TopicPartition

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50
OFFSET_METADATA_MAX_BYTES = 4096


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


@functools.lru_cache(maxsize=1 << 16)
def coordinator_partition(key: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """Partition of ``__consumer_offsets`` / ``__transaction_state`` owning ``key``."""
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed (or staged) offset."""

    offset: int
    leader_epoch: int
    metadata: str | None
    seq: int  # write order, for "newer record wins" on transactional commit


class GroupOffsets:
    """Offsets of every group, committed and staged.

    Parameters
    ----------
    sink
        Optional callable receiving one JSON line per state change (persistence).
    """

    def __init__(self, *, sink: Callable[[str], None] | None = None) -> None:
        self.committed: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.pending: dict[str, dict[int, dict[TopicPartition, OffsetValue]]] = {}
        # Groups with offsets staged by each producer id (Kafka's openGroupsForProducer):
        # a marker visits only these, not every group with pending offsets.
        self._groups_of: dict[int, set[str]] = {}
        self._seq = 0
        self._sink = sink

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _emit(self, **record: object) -> None:
        if self._sink is not None:
            self._sink(json.dumps(record))

    # --- writes -------------------------------------------------------------------

    def commit(
        self, group: str, tp: TopicPartition, offset: int, leader_epoch: int, metadata: str | None
    ) -> None:
        """Store a plain (non-transactional) committed offset."""
        value = OffsetValue(offset, leader_epoch, metadata, self._next_seq())
        self.committed.setdefault(group, {})[tp] = value
        self._emit(t="commit", g=group, tp=list(tp), o=offset, e=leader_epoch, m=metadata)

    def stage(
        self,
        group: str,
        producer_id: int,
        tp: TopicPartition,
        offset: int,
        leader_epoch: int,
        metadata: str | None,
    ) -> None:
        """Stage a transactional offset until the transaction's marker."""
        value = OffsetValue(offset, leader_epoch, metadata, self._next_seq())
        self.pending.setdefault(group, {}).setdefault(producer_id, {})[tp] = value
        self._groups_of.setdefault(producer_id, set()).add(group)
        self._emit(
            t="stage", g=group, pid=producer_id, tp=list(tp), o=offset, e=leader_epoch, m=metadata
        )

    def complete(self, partition: int, producer_id: int, commit: bool) -> None:
        """Apply the marker of ``producer_id`` on ``__consumer_offsets-partition``."""
        groups = self._groups_of.get(producer_id, set())
        for group in sorted(g for g in groups if coordinator_partition(g) == partition):
            groups.discard(group)
            staged = self.pending[group].pop(producer_id, None)
            if not self.pending[group]:
                del self.pending[group]
            if staged is None or not commit:
                continue
            current = self.committed.setdefault(group, {})
            for tp, value in staged.items():
                old = current.get(tp)
                if old is None or old.seq < value.seq:
                    current[tp] = value
        if not groups:
            self._groups_of.pop(producer_id, None)
        self._emit(t="marker", p=partition, pid=producer_id, c=commit)

    def delete_topic(self, topic: str) -> None:
        """Forget offsets of a deleted topic."""
        for offsets in self.committed.values():
            for tp in [tp for tp in offsets if tp[0] == topic]:
                del offsets[tp]
        self._emit(t="delete_topic", topic=topic)

    def delete_group(self, group: str) -> None:
        """Forget every offset of ``group``, committed and staged (DeleteGroups)."""
        self.committed.pop(group, None)
        for producer_id in self.pending.pop(group, {}):
            groups = self._groups_of.get(producer_id)
            if groups is not None:
                groups.discard(group)
                if not groups:
                    del self._groups_of[producer_id]
        self._emit(t="delete_group", g=group)

    def delete_offsets(self, group: str, tps: Iterable[TopicPartition]) -> None:
        """Forget the committed offsets of ``tps`` for ``group`` (OffsetDelete)."""
        offsets = self.committed.get(group, {})
        gone = [tp for tp in tps if tp in offsets]
        for tp in gone:
            del offsets[tp]
        if not offsets:
            self.committed.pop(group, None)
        if gone:
            self._emit(t="delete_offsets", g=group, tps=[list(tp) for tp in gone])

    def load(self, lines: Iterable[str]) -> None:
        """Replay a log written through ``sink``."""
        sink, self._sink = self._sink, None
        try:
            for line in lines:
                if not line.strip():
                    continue
                r = json.loads(line)
                if r["t"] == "commit":
                    self.commit(
                        r["g"], TopicPartition(r["tp"][0], r["tp"][1]), r["o"], r["e"], r["m"]
                    )
                elif r["t"] == "stage":
                    tp = TopicPartition(r["tp"][0], r["tp"][1])
                    self.stage(r["g"], r["pid"], tp, r["o"], r["e"], r["m"])
                elif r["t"] == "marker":
                    self.complete(r["p"], r["pid"], r["c"])
                elif r["t"] == "delete_topic":
                    self.delete_topic(r["topic"])
                elif r["t"] == "delete_group":
                    self.delete_group(r["g"])
                elif r["t"] == "delete_offsets":
                    self.delete_offsets(r["g"], [TopicPartition(t, p) for t, p in r["tps"]])
        finally:
            self._sink = sink

    # --- reads --------------------------------------------------------------------

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        return any(tp in staged for staged in self.pending.get(group, {}).values())

    def fetch(
        self, group: str, tp: TopicPartition, *, require_stable: bool
    ) -> tuple[ErrorCode, OffsetValue | None]:
        """Committed offset of ``tp`` for ``group`` (None if there is none)."""
        if require_stable and self.has_pending(group, tp):
            return ErrorCode.unstable_offset_commit, None
        return ErrorCode.none, self.committed.get(group, {}).get(tp)

    def committed_partitions(self, group: str) -> list[TopicPartition]:
        return sorted(self.committed.get(group, {}))
