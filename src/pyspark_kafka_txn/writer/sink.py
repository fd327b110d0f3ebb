"""Spark's writer interfaces mapped onto the two-phase commit of this package.

* :class:`KafkaStreamWriter` (``df.writeStream.format("kafka_txn")``): each task's
  ``write()`` prepares a transaction, the driver's ``commit(messages, batchId)`` records the
  decision and commits them all (``writer/commit.py``), ``abort()`` aborts them
  (``writer/abort.py``).
* :class:`KafkaBatchWriter` (``df.write.format("kafka_txn")``): the same protocol with a
  job id generated on the driver instead of the query id, and batch id 0; with
  ``txnAppId`` and ``txnVersion`` (an idempotent write, :mod:`.idempotent`), the
  application's query id and the version, decided on the driver before the job.

Both are created on the driver by ``start()`` (the data source parsed the options; the
input columns are checked and the transaction timeout resolved against the broker: the
one network call of a writer's creation) and pickled to the executors; sockets are opened
only there and inside ``write()`` / ``commit()`` / ``abort()``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Self

from kio.schema.errors import ErrorCode
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import Row, StructType

from pyspark_kafka_txn.client.admin import describe_broker_configs
from pyspark_kafka_txn.client.errors import RESOURCE_TOPIC, authorization_error
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaTxnError,
)
from pyspark_kafka_txn.options.writer import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    UNCHECKED_TRANSACTION_TIMEOUT_MS,
    WriterOptions,
)
from pyspark_kafka_txn.pool import Pool
from pyspark_kafka_txn.spark_api import BatchWriterBase, StreamWriterBase
from pyspark_kafka_txn.writer.abort import abort_batch
from pyspark_kafka_txn.writer.acls import acl_hint, acl_hints
from pyspark_kafka_txn.writer.broker_support import check_brokers
from pyspark_kafka_txn.writer.commit import commit_batch
from pyspark_kafka_txn.writer.common import pooled
from pyspark_kafka_txn.writer.idempotent import AppWrite, start_app_write
from pyspark_kafka_txn.writer.rows import arrow_batches
from pyspark_kafka_txn.writer.schema import check_input_schema
from pyspark_kafka_txn.writer.task import TaskIdentity, write_task

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CHECKED", "KafkaBatchWriter", "KafkaStreamWriter", "resolve_timeout"]

logger = logging.getLogger(__name__)

_MAX_TIMEOUT = "transaction.max.timeout.ms"

#: Start checks that passed, with the timeout they resolved, by everything a check depends
#: on (servers, credentials and other client settings, topic, option value): Spark creates
#: a new writer for every micro-batch of a streaming query, and none of that changes under
#: it. Kept like the clients (bounded, forgotten after five idle minutes, never inherited
#: by a forked worker), so a query running for days re-reads the broker's maximum.
CHECKED: Pool[tuple[object, ...], int] = Pool(
    "writer start check", lambda _timeout: None, capacity=32, idle_s=300.0
)


def resolve_timeout(options: WriterOptions) -> int:
    """Check the cluster at the start of a write; return the transaction timeout to use.

    The cluster must be reachable with the given credentials (waiting at most
    ``kafka.max.block.ms``), its brokers must serve every request the writer needs
    (:mod:`.broker_support`: Kafka 3.0 or later) and the ``topic`` option's topic must
    exist, so that these mistakes fail the query at its start instead of failing (and
    retrying) every task.
    The timeout is the option, or the default capped by the broker. A successful check is
    kept in this process for the same settings (:data:`CHECKED`).

    Raises
    ------
    ConfigError
        If ``kafka.transaction.timeout.ms`` exceeds the broker's
        ``transaction.max.timeout.ms`` (InitProducerId would fail in every task), or the
        ``topic`` option names a topic the cluster does not have.
    KafkaConnectionError
        If no broker answered within ``kafka.max.block.ms``.
    AuthenticationError
        If the cluster rejected the TLS handshake or the SASL credentials.
    AuthorizationError
        If the principal may not describe the ``topic`` option's topic (the message
        names the ACL that allows it).
    ProtocolError
        If a broker lacks a request the writer needs (a Kafka release before 3.0).
    """
    key = (
        options.bootstrap_servers,
        frozenset(options.client_options.items()),
        options.topic,
        options.transaction_timeout_ms,
    )
    with CHECKED.use(key, lambda: _check(options)) as timeout:
        return timeout


def _check(options: WriterOptions) -> int:
    where = f"the cluster at '{options.bootstrap_servers}' (option 'kafka.bootstrap.servers')"
    try:
        with acl_hints(options), pooled(options) as cluster:
            check_brokers(cluster, options.bootstrap_servers)
            if options.topic is not None:
                _check_topic(cluster, options.bootstrap_servers, options.topic)
            timeout = _resolve(cluster, options)
    except KafkaConnectionError as exc:
        raise KafkaConnectionError(
            f"The kafka_txn writer cannot reach {where} within kafka.max.block.ms="
            f"{options.max_block_ms}: {exc}"
        ) from None
    except AuthenticationError as exc:
        raise AuthenticationError(
            f"The kafka_txn writer cannot connect to {where}: {exc}"
        ) from None
    return timeout


def _check_topic(cluster: ClusterClient, servers: str, topic: str) -> None:
    """Fail at the start when the ``topic`` option names a topic the cluster lacks.

    One Metadata request (connection failures retried); a missing topic is not waited
    for: the writer never creates topics.
    """
    body = cluster.retrying(f"metadata {topic}", lambda: cluster.refresh([topic]))
    code = next((t.error_code for t in body.topics if str(t.name) == topic), ErrorCode.none)
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_topic_exception):
        raise ConfigError(
            f"Topic '{topic}' of option 'topic' does not exist in the cluster at "
            f"'{servers}' ({code.name}): the kafka_txn writer never creates "
            "topics; create it first"
        )
    denied = authorization_error(code, "Metadata", {RESOURCE_TOPIC: ("DESCRIBE", topic)})
    if denied is not None:
        raise denied
    if code not in (ErrorCode.none, ErrorCode.leader_not_available):
        raise BrokerError(code, f"metadata for topic '{topic}' of option 'topic'")


def _resolve(cluster: ClusterClient, options: WriterOptions) -> int:
    try:
        value = describe_broker_configs(cluster, [_MAX_TIMEOUT]).get(_MAX_TIMEOUT)
        broker_max = int(value) if value is not None else None
    except (KafkaConnectionError, AuthenticationError):
        raise
    except AuthorizationError as exc:  # the optional DescribeConfigs ACL is missing
        logger.warning(
            "could not read the broker's %s (%s; the optional ACL %s): %s",
            _MAX_TIMEOUT,
            exc,
            acl_hint(options, exc).removeprefix("needs an ACL such as: "),
            _unchecked(options),
        )
        broker_max = None
    except KafkaTxnError as exc:
        logger.warning(
            "could not read the broker's %s (%s): %s", _MAX_TIMEOUT, exc, _unchecked(options)
        )
        broker_max = None
    if options.transaction_timeout_ms is None:
        if broker_max is None:
            return UNCHECKED_TRANSACTION_TIMEOUT_MS
        return min(DEFAULT_TRANSACTION_TIMEOUT_MS, broker_max)
    if broker_max is not None and options.transaction_timeout_ms > broker_max:
        raise ConfigError(
            f"Option 'kafka.transaction.timeout.ms' ({options.transaction_timeout_ms}) exceeds "
            f"the broker's {_MAX_TIMEOUT} ({broker_max})"
        )
    return options.transaction_timeout_ms


def _unchecked(options: WriterOptions) -> str:
    """What the writer does without the broker's ``transaction.max.timeout.ms``."""
    if options.transaction_timeout_ms is None:
        return (
            "kafka.transaction.timeout.ms defaults to "
            f"{UNCHECKED_TRANSACTION_TIMEOUT_MS} ms instead of {DEFAULT_TRANSACTION_TIMEOUT_MS} ms "
            "(set it explicitly if batches take longer)"
        )
    return "kafka.transaction.timeout.ms is not checked against it"


def _task(query_id: str | None, batch_id: int = 0) -> TaskIdentity:
    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - write() always runs in a Spark task
        raise KafkaTxnError("kafka_txn write() must run inside a Spark task")
    query = query_id or ctx.getLocalProperty("sql.streaming.queryId")
    if not query:  # pragma: no cover - Spark sets it for every streaming batch
        raise KafkaTxnError("no streaming query id in the task's local properties")
    if query_id is not None:
        return TaskIdentity(query, batch_id, ctx.partitionId(), ctx.attemptNumber())
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    run = _run_id(ctx.getLocalProperty("spark.jobGroup.id"), query)
    return TaskIdentity(query, int(batch or 0), ctx.partitionId(), ctx.attemptNumber(), run)


def _run_id(job_group: str | None, query_id: str) -> str | None:
    """The run id of a streaming query from its micro-batch's job group, else None.

    Spark runs each micro-batch in the job group named after the query's run id (a UUID,
    new at every start of the query; verified on 4.0 to 4.3). Anything else (no group, a
    group that is no UUID, or the query id itself) gives None: the driver then checks for
    another prefix at every new decision, as without a run id.
    """
    if not job_group or job_group == query_id:
        return None
    try:
        return str(uuid.UUID(job_group)) if len(job_group) == 36 else None
    except ValueError:
        return None


class _KafkaWriter:
    """What both writers share: created on the driver by :meth:`start` with the parsed
    options and the resolved transaction timeout, pickled to the executors, where each
    task's :meth:`write` prepares a transaction.

    Parameters
    ----------
    options
        The parsed writer options.
    timeout_ms
        The transaction timeout resolved by :func:`resolve_timeout`.
    """

    #: The batch job's id, which stands for the query id in its transactional ids (None:
    #: a streaming query, whose id and batch id the task reads from Spark).
    job_id: str | None = None
    #: The batch id of a batch job (its ``txnVersion``, else 0).
    batch_id: int = 0
    #: The run of an idempotent batch write (``txnAppId``), decided on the driver.
    app: AppWrite | None = None

    def __init__(self, options: WriterOptions, timeout_ms: int) -> None:
        self.options = options
        self.timeout_ms = timeout_ms

    @classmethod
    def start(cls, options: WriterOptions, schema: StructType) -> Self:
        """Check the input columns, then the cluster (network I/O), and create the writer.

        Parameters
        ----------
        options
            The parsed writer options.
        schema
            The input DataFrame's schema.

        Raises
        ------
        ConfigError, KafkaConnectionError, AuthenticationError, AuthorizationError
            As :func:`~pyspark_kafka_txn.writer.schema.check_input_schema` and
            :func:`resolve_timeout`: at the start of the query or job, not in every task.
        """
        check_input_schema(schema, options.topic)
        return cls(options, resolve_timeout(options))

    def write(self, iterator: Iterator[pa.RecordBatch | Row]) -> WriterCommitMessage:
        """Prepare this task's transaction (executor).

        Spark gives Arrow record batches, or rows where PySpark has no Arrow writer for this
        kind of write (:mod:`pyspark_kafka_txn.spark_api`); both become record batches.
        """
        who = _task(self.job_id, self.batch_id)
        return write_task(self.options, who, arrow_batches(iterator), self.timeout_ms, self.app)


class KafkaStreamWriter(_KafkaWriter, StreamWriterBase):
    """Exactly-once micro-batch writer (see the module docstring).

    Created by :meth:`start` on the driver, like the batch writer.
    """

    @classmethod
    def start(cls, options: WriterOptions, schema: StructType) -> Self:
        """As :meth:`_KafkaWriter.start`; ``txnAppId`` is refused (batch writes only).

        Raises
        ------
        ConfigError
            If ``txnAppId`` is given: a streaming query's batches are idempotent by its
            checkpoint already.
        """
        if options.app_id is not None:
            raise ConfigError(
                "Option 'txnAppId' applies to df.write only (e.g. inside foreachBatch, with "
                "txnVersion=batch_id): a streaming query's writeStream is exactly once by "
                "its checkpoint already; remove txnAppId and txnVersion"
            )
        return super().start(options, schema)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Record the decision, then commit every task's transaction (driver)."""
        commit_batch(self.options, messages, batchId)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Abort the batch's transactions unless a decision to commit it stands (driver)."""
        abort_batch(self.options, messages, batchId)


class KafkaBatchWriter(_KafkaWriter, BatchWriterBase):
    """``df.write.format("kafka_txn")``: the same two-phase commit for one job.

    Created by :meth:`start` on the driver, like the streaming writer; the job's id is
    generated here, on the driver. With ``txnAppId`` and ``txnVersion`` the job's id is
    the application's and its batch id the version, and :meth:`start` decides whether
    the version is written at all (:func:`~.idempotent.start_app_write`).
    """

    def __init__(self, options: WriterOptions, timeout_ms: int) -> None:
        super().__init__(options, timeout_ms)
        self.job_id = f"job-{uuid.uuid4()}"

    @classmethod
    def start(cls, options: WriterOptions, schema: StructType) -> Self:
        """As :meth:`_KafkaWriter.start`; for an idempotent write, also look up what the
        application committed last (network I/O), and claim its ids.

        Raises
        ------
        CommitFailedError
            If a previous version of the application was decided and lost transactions:
            it must be written again first.
        """
        writer = super().start(options, schema)
        if options.app_id is not None:
            with acl_hints(options), pooled(options) as cluster:
                writer.app = start_app_write(cluster, options)
            writer.job_id = writer.app.query_id
            writer.batch_id = writer.app.version
        return writer

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Record the decision, then commit every task's transaction (driver)."""
        commit_batch(self.options, messages, self.batch_id, app=self.app)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Abort the job's transactions, also those of tasks killed mid-write (driver)."""
        abort_batch(self.options, messages, self.batch_id, query_id=self.job_id, app=self.app)
