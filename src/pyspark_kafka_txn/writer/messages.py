"""The commit message a write task sends to the driver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql.datasource import WriterCommitMessage

from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.decision import Handle

__all__ = ["COMMITTED", "EMPTY", "FRESH", "PENDING", "Kind", "TaskMessage", "task_messages"]

Kind = Literal["fresh", "pending", "committed", "empty"]
#: A transaction prepared by this attempt: the driver records and commits it.
FRESH: Kind = "fresh"
#: The batch was decided before; the recorded transaction is still open: commit it.
PENDING: Kind = "pending"
#: Nothing to do: the partition's batch is already committed (or, at least once, the task
#: committed its own transaction).
COMMITTED: Kind = "committed"
#: The task had no rows.
EMPTY: Kind = "empty"


@dataclass(frozen=True, slots=True)
class TaskMessage(WriterCommitMessage):
    """What one task tells the driver. Never holds a secret.

    Attributes
    ----------
    query_id, batch, partition
        Who wrote (the streaming query id or the batch job's id; the batch id; the Spark
        partition).
    kind
        :data:`FRESH`, :data:`PENDING`, :data:`COMMITTED` or :data:`EMPTY`.
    handle
        The prepared transaction (fresh, pending).
    rows
        Rows written by this attempt.
    anchor
        An output partition the task wrote to (where the decision can be recorded).
    commit_by_ms
        Wall-clock time (ms since the epoch) after which the driver must not decide to
        commit this fresh transaction: it may be aborted at its ``transaction.timeout.ms``
        before its EndTxn arrives. ``None`` with KIP-939 two-phase commit (no timeout).
    run
        The streaming query's run id (see :class:`~.task.TaskIdentity`), or None.
    """

    query_id: str
    batch: int
    partition: int
    kind: Kind
    handle: Handle | None = None
    rows: int = 0
    anchor: TopicPartition | None = None
    commit_by_ms: int | None = None
    run: str | None = None


def task_messages(messages: Sequence[object | None]) -> list[TaskMessage]:
    """The messages of the tasks that returned one, from what Spark passes the driver's
    ``commit()`` / ``abort()`` (None for a task that failed)."""
    return [m for m in messages if isinstance(m, TaskMessage)]
