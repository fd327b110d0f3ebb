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
slot, time) is written to ``{prefix}{Q}-decision`` **last**. Two slots alternate, so a
crash while a new decision's chunks are written leaves the previous header pointing at
intact chunks. A decision none of whose transactions can commit any more (the broker
aborted them all, e.g. at their timeout, before a single EndTxn got through) is
*withdrawn* by a newer header for the same batch: the batch is then undecided again and
its replay writes it afresh, however Spark distributes the rows. Every entry is committed
for an existing partition of an output topic (the *anchor*), as Kafka requires; the
offset is the batch id.
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
from pyspark_kafka_txn.writer.ids import decision_group, transactional_id

__all__ = [
    "CHUNK_CHARS",
    "Decision",
    "Handle",
    "read_decision",
    "withdraw_decision",
    "write_decision",
]

CHUNK_CHARS = 4000
_FORMAT = 1


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
    anchor: tuple[str, int]
    time_ms: int
    #: The decision was withdrawn: nothing of ``batch`` was committed, it is undecided.
    withdrawn: bool = False

    def stands_for(self, batch: int) -> bool:
        """Whether this is a standing decision to commit ``batch``."""
        return self.batch == batch and not self.withdrawn


def _encode(handles: Mapping[int, Handle]) -> str:
    items = []
    for _, h in sorted(handles.items()):
        t = h.transaction
        items.append(f"{h.partition}:{t.producer_id}:{t.producer_epoch}:{t.transaction_version}")
    return ",".join(items)


def _decode(text: str, prefix: str, query_id: str) -> dict[int, Handle]:
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
    KafkaTxnError
        If the record is unreadable (its chunks do not match the header's checksum).
    """
    entries = fetch_offsets(cluster, decision_group(prefix, query_id), None, require_stable=False)
    best: tuple[tuple[int, int], dict[str, int], tuple[str, int]] | None = None
    for tp, committed in entries.items():
        if committed.offset < 0 or not committed.metadata:
            continue
        try:
            header = json.loads(committed.metadata)
        except ValueError:
            continue
        if not isinstance(header, dict) or header.get("f") != _FORMAT:
            continue
        key = (int(header["b"]), int(header["t"]))
        if best is None or key > best[0]:
            best = (key, header, tp)
    if best is None:
        return None
    (decided, time_ms), header, anchor = best
    slot = int(header["s"])
    if header.get("x"):
        return Decision(decided, {}, slot, anchor, time_ms, withdrawn=True)
    if batch is not None and decided != batch:
        return Decision(decided, {}, slot, anchor, time_ms)
    parts = []
    for k in range(1, int(header["n"]) + 1):
        chunk = fetch_offsets(
            cluster, _chunk_group(prefix, query_id, slot, k), [anchor], require_stable=False
        ).get(anchor)
        parts.append(
            (chunk.metadata or "") if chunk is not None and chunk.offset == decided else ""
        )
    text = "".join(parts)
    if zlib.crc32(text.encode()) != int(header["c"]):
        raise KafkaTxnError(
            f"The commit decision of query {query_id} for batch {decided} is unreadable "
            f"(group {decision_group(prefix, query_id)}: its chunks do not match the header)"
        )
    return Decision(decided, _decode(text, prefix, query_id), slot, anchor, time_ms)


def write_decision(
    cluster: ClusterClient,
    prefix: str,
    query_id: str,
    batch: int,
    handles: Mapping[int, Handle],
    anchor: tuple[str, int],
    previous: Decision | None,
) -> Decision:
    """Record durably that batch ``batch`` commits ``handles``; header last.

    Parameters
    ----------
    anchor
        An existing output partition to commit the entries for.
    previous
        The decision read before (its slot is not overwritten).
    """
    slot = 1 - previous.slot if previous is not None else 0
    text = _encode(handles)
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    for k, chunk in enumerate(chunks, start=1):
        commit_offsets(cluster, _chunk_group(prefix, query_id, slot, k), {anchor: (batch, chunk)})
    now = _write_header(cluster, prefix, query_id, batch, slot, anchor, previous, text, len(chunks))
    return Decision(batch, dict(handles), slot, anchor, now)


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
    anchor: tuple[str, int],
    previous: Decision | None,
    text: str,
    chunks: int,
    withdrawn: bool = False,
) -> int:
    """Commit the header of a decision (or of its withdrawal); return its time.

    The time is later than ``previous``'s, so the header with the larger (batch, time)
    wins when they are read back.
    """
    now = int(time.time() * 1000)
    if previous is not None and previous.time_ms >= now:
        now = previous.time_ms + 1
    fields: dict[str, int] = {
        "f": _FORMAT, "b": batch, "n": chunks, "s": slot, "t": now,
        "c": zlib.crc32(text.encode()),
    }  # fmt: skip
    if withdrawn:
        fields["x"] = 1
    header = json.dumps(fields, separators=(",", ":"))
    commit_offsets(cluster, decision_group(prefix, query_id), {anchor: (batch, header)})
    return now
