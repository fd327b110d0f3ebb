"""The driver's durable commit decision, kept in Kafka as committed group offsets.

Before the first EndTxn of batch ``B`` the driver records ``(B, handles)``, where a handle
is a Spark partition with its prepared transaction (recorded as producer id, epoch and
transaction version: the transactional id follows from the partition). Once recorded, the
outcome of ``B`` is *commit*, whatever crashes afterwards: a replay of ``B`` finds the
record and rolls it forward (see ``docs/design.md``).

Storage, with no topic of its own: OffsetCommit (outside any group generation) to groups
named after the query. Offset metadata is limited to ``offset.metadata.max.bytes`` (4096
by default), so the handle list is cut into chunks of at most :data:`CHUNK_CHARS`, each the
metadata of ``{prefix}{Q}-decision-{slot}-{k}``; the header (batch, chunk count, checksum,
slot, time, the number of Spark partitions of the run that decided, and the run that
checked for another prefix) is written to
``{prefix}{Q}-decision`` **last**. Two slots alternate, so a
crash while a new decision's chunks are written leaves the previous header pointing at
intact chunks. A decision none of whose transactions can commit any more (the broker
aborted them all, e.g. at their timeout, before a single EndTxn got through) is
*withdrawn* by a newer header for the same batch: the batch is then undecided again and
its replay writes it afresh, however Spark distributes the rows. Every entry is committed
for an existing partition of an output topic (the *anchor*), as Kafka requires; the
offset is the batch id.

The header's ``"f"`` is the record's format (:data:`~pyspark_kafka_txn.formats.DECISION_RECORD`,
which covers the chunks too): a header of a format this package does not read raises
:class:`~pyspark_kafka_txn.errors.FormatVersionError`; metadata that is not a header of
ours at all (not a JSON object with an integer ``"f"``) is ignored.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark_kafka_txn.client.admin import commit_offsets, fetch_offsets
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.client.producer import PreparedTransaction
from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.formats import DECISION_RECORD
from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.ids import decision_group, transactional_id

__all__ = [
    "CHUNK_CHARS",
    "Decision",
    "Handle",
    "Header",
    "decode_handles",
    "parse_header",
    "read_decision",
    "withdraw_decision",
    "write_decision",
]

CHUNK_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Handle:
    """A prepared transaction of one Spark partition: what ends it from anywhere."""

    partition: int
    transaction: PreparedTransaction


@dataclass(frozen=True, slots=True)
class Decision:
    """A recorded decision to commit ``handles`` as batch ``batch`` (or its withdrawal)."""

    batch: int
    handles: Mapping[int, Handle]
    slot: int
    anchor: TopicPartition
    time_ms: int
    #: The decision was withdrawn: nothing of ``batch`` was committed, it is undecided.
    withdrawn: bool = False
    #: How many Spark partitions the run that decided had (None: a record without it).
    partitions: int | None = None
    #: The streaming run that found no other prefix before deciding (None: not recorded).
    checked_run: str | None = None

    def stands_for(self, batch: int) -> bool:
        """Whether this is a standing decision to commit ``batch``."""
        return self.batch == batch and not self.withdrawn


@dataclass(frozen=True, slots=True)
class Header:
    """A decoded header: where the handle list is and what it says."""

    batch: int
    time_ms: int
    slot: int
    chunks: int
    checksum: int
    withdrawn: bool
    #: ``"p"``: the Spark partitions of the run that decided (absent in older records).
    partitions: int | None = None
    #: ``"r"``: the streaming run that found no other ``transactionalIdPrefix`` of the
    #: query before deciding (absent in older records, replays and batch writes).
    checked_run: str | None = None


def parse_header(metadata: str | None, whose: str) -> Header | None:
    """Decode the metadata of a decision group's entry; None if it is not a header of ours.

    Parameters
    ----------
    metadata
        The committed offset's metadata.
    whose
        Names the record in an error ("of query Q (group G)").

    Returns
    -------
    Header or None
        None for empty metadata, metadata that is not JSON, and JSON that is not an
        object with an integer ``"f"``.

    Raises
    ------
    FormatVersionError
        If ``"f"`` is a format this package does not read (a newer one wrote it).
    KafkaTxnError
        If a header of a format it reads lacks a field.
    """
    fields = DECISION_RECORD.decode(metadata, "f", whose)
    if fields is None:
        return None
    try:
        return Header(
            int(fields["b"]),
            int(fields["t"]),
            int(fields["s"]),
            int(fields["n"]),
            int(fields["c"]),
            bool(fields.get("x")),
            int(fields["p"]) if "p" in fields else None,
            str(fields["r"]) if "r" in fields else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise KafkaTxnError(
            f"The decision record {whose} is unreadable: its header {metadata!r} lacks {exc}"
        ) from exc


def _encode(handles: Mapping[int, Handle]) -> str:
    items = []
    for _, h in sorted(handles.items()):
        t = h.transaction
        items.append(f"{h.partition}:{t.producer_id}:{t.producer_epoch}:{t.transaction_version}")
    return ",".join(items)


def decode_handles(text: str, prefix: str, query_id: str) -> dict[int, Handle]:
    """The handles of a decision's handle list (its chunks joined), format 1.

    ``{P}:{producer id}:{epoch}:{transaction version}`` per Spark partition, separated by
    commas; the transactional id follows from the partition.
    """
    out: dict[int, Handle] = {}
    for item in filter(None, text.split(",")):
        p, pid, epoch, tv = (int(x) for x in item.split(":"))
        tid = transactional_id(prefix, query_id, p)
        out[p] = Handle(p, PreparedTransaction(tid, pid, epoch, tv))
    return out


def _chunk_group(prefix: str, query_id: str, slot: int, chunk: int) -> str:
    return f"{decision_group(prefix, query_id)}-{slot}-{chunk}"


def read_decision(
    cluster: ClusterClient, prefix: str, query_id: str, *, batch: int | None = None
) -> Decision | None:
    """The query's last recorded decision, or None if it never recorded one.

    Parameters
    ----------
    batch
        When given, the handle list is read only if the last decision is for this batch
        (otherwise the returned decision has no handles): the common case costs one
        OffsetFetch.

    Raises
    ------
    FormatVersionError
        If a header has a format this package does not read (a newer one wrote it).
    KafkaTxnError
        If the record is unreadable (its chunks do not match the header's checksum).
    """
    group = decision_group(prefix, query_id)
    whose = f"of query {query_id} (group {group})"
    entries = fetch_offsets(cluster, group, None, require_stable=False)
    best: tuple[Header, TopicPartition] | None = None
    for tp, committed in entries.items():
        if committed.offset < 0:
            continue
        header = parse_header(committed.metadata, whose)
        if header is None:
            continue
        if best is None or (header.batch, header.time_ms) > (best[0].batch, best[0].time_ms):
            best = (header, tp)
    if best is None:
        return None
    header, anchor = best
    decided, time_ms, slot = header.batch, header.time_ms, header.slot
    run = header.checked_run
    if header.withdrawn:
        return Decision(decided, {}, slot, anchor, time_ms, withdrawn=True, checked_run=run)
    if batch is not None and decided != batch:
        return Decision(decided, {}, slot, anchor, time_ms, checked_run=run)
    parts = []
    for k in range(1, header.chunks + 1):
        chunk = fetch_offsets(
            cluster, _chunk_group(prefix, query_id, slot, k), [anchor], require_stable=False
        ).get(anchor)
        parts.append(
            (chunk.metadata or "") if chunk is not None and chunk.offset == decided else ""
        )
    text = "".join(parts)
    if zlib.crc32(text.encode()) != header.checksum:
        raise KafkaTxnError(
            f"The commit decision of query {query_id} for batch {decided} is unreadable "
            f"(group {decision_group(prefix, query_id)}: its chunks do not match the header)"
        )
    handles = decode_handles(text, prefix, query_id)
    return Decision(
        decided, handles, slot, anchor, time_ms, partitions=header.partitions, checked_run=run
    )


def write_decision(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    handles: Mapping[int, Handle],
    anchor: TopicPartition,
    previous: Decision | None,
    partitions: int | None = None,
    checked_run: str | None = None,
) -> Decision:
    """Record durably that batch ``batch`` commits ``handles``; header last.

    Parameters
    ----------
    anchor
        An existing output partition to commit the entries for.
    previous
        The decision read before (its slot is not overwritten).
    partitions
        The number of Spark partitions of the run that decides (recorded as ``"p"``: a
        replay that must write a partition again compares its own with it).
    checked_run
        The streaming run that found no other prefix before this decision (recorded as
        ``"r"``: the run's later decisions need not look again).
    """
    slot = 1 - previous.slot if previous is not None else 0
    text = _encode(handles)
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    for k, chunk in enumerate(chunks, start=1):
        commit_offsets(cluster, _chunk_group(prefix, query_id, slot, k), {anchor: (batch, chunk)})
    now = _write_header(
        cluster, prefix, query_id, batch, slot, anchor, previous, text, len(chunks),
        partitions=partitions, checked_run=checked_run,
    )  # fmt: skip
    return Decision(
        batch, dict(handles), slot, anchor, now, partitions=partitions, checked_run=checked_run
    )


def withdraw_decision(
    cluster: ClusterClient, prefix: str, query_id: str, decision: Decision
) -> Decision:
    """Record durably that ``decision`` no longer stands: its batch is undecided again.

    Only for a decision none of whose transactions committed or can still commit (the
    caller checks): a newer header for the same batch, without handles.
    """
    batch, slot, anchor = decision.batch, decision.slot, decision.anchor
    now = _write_header(cluster, prefix, query_id, batch, slot, anchor, decision, "", 0, True)
    return Decision(batch, {}, slot, anchor, now, withdrawn=True)


def _write_header(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    slot: int,
    anchor: TopicPartition,
    previous: Decision | None,
    text: str,
    chunks: int,
    withdrawn: bool = False,
    partitions: int | None = None,
    checked_run: str | None = None,
) -> int:
    """Commit the header of a decision (or of its withdrawal); return its time.

    The time is later than ``previous``'s, so the header with the larger (batch, time)
    wins when they are read back.
    """
    now = int(time.time() * 1000)
    if previous is not None and previous.time_ms >= now:
        now = previous.time_ms + 1
    fields: dict[str, int | str] = {
        "f": DECISION_RECORD.current, "b": batch, "n": chunks, "s": slot, "t": now,
        "c": zlib.crc32(text.encode()),
    }  # fmt: skip
    if withdrawn:
        fields["x"] = 1
    if partitions is not None:
        fields["p"] = partitions
    if checked_run is not None:
        fields["r"] = checked_run
    header = json.dumps(fields, separators=(",", ":"))
    commit_offsets(cluster, decision_group(prefix, query_id), {anchor: (batch, header)})
    return now
