"""Batch and streaming readers of ``kafka_txn``: LSO-bounded planning, position-based reads.

Driver side (:class:`_OffsetClient`): partition discovery and ListOffsets through a
confluent-kafka ``AdminClient`` **with the configured isolation level**, so "latest" is the
Last Stable Offset under ``read_committed`` and the high watermark otherwise. A micro-batch
therefore never ends past the LSO: records of a transaction still open at planning time
are left for a later micro-batch.

Executor side (:func:`read_range`): a librdkafka consumer in assign mode reads
``[start, end)``. Completion is decided by the consumer's **position**, never by the offset
of the last record seen, so ranges that end on a commit/abort marker or hold nothing but
aborted records finish. Offset gaps left by markers and aborted records are never data
loss; only offsets below the log start offset and vanished partitions are, and they follow
``failOnDataLoss``.
"""

from __future__ import annotations

import collections
import gc
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pyspark_kafka_txn.client.errors import AUTHORIZATION_CODES, RESOURCE_TOPIC
from pyspark_kafka_txn.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigError,
    DataLossError,
    KafkaConnectionError,
    KafkaTxnError,
)
from pyspark_kafka_txn.offsets import (
    ORIGIN,
    OffsetJson,
    OffsetRange,
    PartitionOffsets,
    from_json_dict,
    origin_of,
    pack_ranges,
    rate_limit,
    split_ranges,
    to_json_dict,
    with_origin,
)
from pyspark_kafka_txn.options import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    OffsetSpec,
    ReaderOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    TopicPartition,
    redact,
)
from pyspark_kafka_txn.schema import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "DataLossError",
    "KafkaBatchReader",
    "KafkaInputPartition",
    "KafkaStreamReader",
    "read_range",
]

logger = logging.getLogger(__name__)

#: Rows per Arrow record batch yielded by ``read()`` (Spark's default Arrow batch size).
ARROW_BATCH_ROWS = 10_000
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_ADMIN_TIMEOUT_S = 30.0
#: How often the driver looks at librdkafka's error events until the cluster first answers.
_PROBE_S = 0.5

_DATA_LOSS_HINT = (
    " Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    "set the source option 'failOnDataLoss' to 'false'."
)


def _not_authorized(
    options: ReaderOptions, code: int, operation: str, topic: str, context: str
) -> AuthorizationError:
    """The error of a refused operation on ``topic``, naming the ACL the reader needs.

    Parameters
    ----------
    options
        The reader's options (the SASL username names the principal; no secret is used).
    code
        Kafka's error code (29).
    operation
        The operation Kafka checked (``READ`` for Fetch, ``DESCRIBE`` for metadata).
    topic
        The topic.
    context
        The request.

    Returns
    -------
    AuthorizationError
        With a hint: Read on the topic (it implies Describe).
    """
    from kio.schema.errors import ErrorCode  # only on this error path: kio is slow to import

    user = options.kafka_params.get("sasl.username")
    principal = f"User:{user}" if user else "User:<principal>"
    error = AuthorizationError(ErrorCode(code), operation, RESOURCE_TOPIC, topic, context)
    return error.with_hint(
        f"needs an ACL such as: --allow-principal {principal} --operation Read --topic "
        f"{topic} (see 'Least-privilege ACLs' in the kafka_txn reader's documentation)"
    )


def _report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(message + _DATA_LOSS_HINT)
    logger.warning("%s Continuing because failOnDataLoss is false.", message)


# --------------------------------------------------------------------------- partitions


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition. Picklable."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        """The topic-partition read."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class KafkaInputPartitions(InputPartition):
    """One Spark task reading several ranges one after the other (``minRecordsPerPartition``).

    Picklable.
    """

    ranges: tuple[KafkaInputPartition, ...]


# --------------------------------------------------------------------------- driver


class _OffsetClient:
    """The driver's metadata and ListOffsets handle (created lazily, never pickled)."""

    def __init__(self, options: ReaderOptions) -> None:
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import AdminClient

        self._options = options
        #: librdkafka's error events (connection, TLS, SASL failures), newest last.
        self._events: collections.deque[Any] = collections.deque(maxlen=64)
        #: Whether the cluster has answered once, and whether librdkafka reported every
        #: broker down before that (see :meth:`_reach`).
        self._reached = self._all_down = False
        config: dict[str, Any] = {
            **options.admin_config(),
            # A topic named in a metadata look-up must never be created by it.
            "allow.auto.create.topics": False,
            "error_cb": self._on_error,
        }
        try:
            self._admin = AdminClient(config)
        except Exception as exc:  # noqa: BLE001 - librdkafka reports bad settings here
            raise ConfigError(f"Invalid kafka.* option: {_redacted_error(exc, options)}") from None
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if options.read_committed
            else IsolationLevel.READ_UNCOMMITTED
        )

    def topic_partitions(self, *, at_start: bool = False) -> set[TopicPartition]:
        """The topic-partitions the subscription covers right now.

        Parameters
        ----------
        at_start
            A new query or a batch read is being planned: a subscribed topic or an
            assigned partition the cluster does not have fails it (later, one that
            vanished is data loss, see ``failOnDataLoss``).

        Raises
        ------
        ConfigError
            ``at_start``, naming the topics or partitions that do not exist.
        AuthorizationError
            When the principal may not describe a topic of ``subscribe`` or ``assign``.
        """
        sub = self._options.subscription
        metadata = self._retry(
            "list topics", lambda: self._admin.list_topics(timeout=_ADMIN_TIMEOUT_S)
        )
        known: dict[str, set[int]] = {
            name: set(meta.partitions)
            for name, meta in metadata.topics.items()
            if meta.error is None
        }
        self._check_described(known)
        if at_start:
            self._check_exist(known)
        existing = {name: p for name, p in known.items() if name not in _INTERNAL_TOPICS}
        if isinstance(sub, Assign):
            return {tp for tp in sub.partitions if tp.partition in existing.get(tp.topic, ())}
        if isinstance(sub, Subscribe):
            topics = [t for t in sub.topics if t in existing]
        else:
            topics = [t for t in existing if sub.matches(t)]
        return {TopicPartition(t, p) for t in topics for p in existing[t]}

    def _check_described(self, known: Mapping[str, set[int]]) -> None:
        """Fail when a named topic is missing from the listing because of an ACL.

        A listing of all topics silently leaves out the ones the principal may not
        describe; asking for a missing topic by name tells "not authorized" (Kafka checks
        that before existence) from "does not exist".
        """
        sub = self._options.subscription
        if isinstance(sub, Subscribe):
            named = set(sub.topics)
        elif isinstance(sub, Assign):
            named = {tp.topic for tp in sub.partitions}
        else:
            return  # subscribePattern: like Kafka's, matches only describable topics
        for topic in sorted(named - set(known)):
            metadata = self._retry(
                f"describe topic {topic!r}",
                lambda topic=topic: self._admin.list_topics(topic=topic, timeout=_ADMIN_TIMEOUT_S),
            )
            meta = metadata.topics.get(topic)
            error = None if meta is None else meta.error
            if error is not None and error.code() in AUTHORIZATION_CODES:
                raise _not_authorized(self._options, error.code(), "DESCRIBE", topic, "Metadata")

    def _check_exist(self, known: Mapping[str, set[int]]) -> None:
        """Fail when ``subscribe`` / ``assign`` name topics or partitions not in ``known``."""
        sub = self._options.subscription
        where = f"in the cluster at '{self._options.bootstrap_servers}'"
        if isinstance(sub, Subscribe):
            topics = [t for t in sub.topics if t not in known]
            if topics:
                raise ConfigError(
                    f"Option 'subscribe': topic(s) {', '.join(map(repr, topics))} do not exist "
                    f"{where} (or may not be described by this principal); create them first, "
                    "or use 'subscribePattern' to read topics as they appear"
                )
        elif isinstance(sub, Assign):
            missing = [tp for tp in sub.partitions if tp.partition not in known.get(tp.topic, ())]
            if missing:
                raise ConfigError(
                    f"Option 'assign': topic-partition(s) {', '.join(map(str, missing))} do "
                    f"not exist {where}"
                )

    def earliest(self, tps: Sequence[TopicPartition] | set[TopicPartition]) -> PartitionOffsets:
        """Log start offsets."""
        return self._list({tp: _offset_spec().earliest() for tp in tps})

    def latest(self, tps: Sequence[TopicPartition] | set[TopicPartition]) -> PartitionOffsets:
        """LSO (read_committed) or high watermark (read_uncommitted)."""
        return self._list({tp: _offset_spec().latest() for tp in tps})

    def high_watermarks(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        """High watermarks, whatever the isolation level (one ListOffsets round)."""
        from confluent_kafka import IsolationLevel

        spec = _offset_spec()
        return self._list({tp: spec.latest() for tp in tps}, IsolationLevel.READ_UNCOMMITTED)

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        """First offset with a timestamp ≥ the given one; -1 where no record qualifies."""
        spec = _offset_spec()
        return self._list({tp: spec.for_timestamp(ts) for tp, ts in timestamps.items()})

    def _list(self, specs: Mapping[TopicPartition, Any], isolation: Any = None) -> PartitionOffsets:
        if not specs:
            return {}
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CkTopicPartition

        def call() -> PartitionOffsets:
            futures = self._admin.list_offsets(
                {CkTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()},
                isolation_level=self._isolation if isolation is None else isolation,
                request_timeout=_ADMIN_TIMEOUT_S,
            )
            out: PartitionOffsets = {}
            for ck, future in futures.items():
                try:
                    out[TopicPartition(ck.topic, ck.partition)] = int(future.result().offset)
                except KafkaException as exc:
                    code = exc.args[0].code() if exc.args else None
                    if isinstance(code, int) and code in AUTHORIZATION_CODES:
                        raise _not_authorized(
                            self._options, code, "DESCRIBE", ck.topic, "ListOffsets"
                        ) from None
                    raise
            return out

        result: PartitionOffsets = self._retry("list offsets", call)
        return result

    def _on_error(self, err: Any) -> None:
        """librdkafka's ``error_cb``: keep the event (served by ``poll()``)."""
        from confluent_kafka import KafkaError

        self._events.append(err)
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._all_down = True

    def _reach(self) -> None:
        """Until the cluster has answered once, watch librdkafka's error events.

        A cluster that rejects the TLS handshake or the SASL credentials fails at once
        (:class:`AuthenticationError`, not retried); one that no broker of the bootstrap
        list answers fails this attempt as soon as librdkafka has reported every broker
        down (:class:`KafkaConnectionError`, retried ``fetchOffset.numRetries`` times, each
        retry after one more probe), instead of each look-up waiting its whole timeout.
        Once the cluster has answered, look-ups wait and retry as usual (a broker restart
        mid-query is not fatal).
        """
        if self._reached:
            return
        from confluent_kafka import KafkaError

        where = (
            f"the cluster at '{self._options.bootstrap_servers}' (option 'kafka.bootstrap.servers')"
        )
        deadline = time.monotonic() + _ADMIN_TIMEOUT_S
        while True:
            try:
                self._admin.list_topics(timeout=_PROBE_S)
            except Exception:  # noqa: BLE001 - a timeout: what librdkafka reported says why
                self._admin.poll(0)
            else:
                self._reached = True
                return
            events = list(self._events)
            for err in events:
                if err.code() == KafkaError._AUTHENTICATION or (
                    err.code() in (KafkaError._SSL, KafkaError._TRANSPORT)
                    and "SSL handshake failed" in err.str()
                ):
                    raise AuthenticationError(
                        f"Cannot connect to {where}: {_redacted(err.str(), self._options)}"
                    )
            if self._all_down or time.monotonic() > deadline:
                causes = [e.str() for e in events if e.code() != KafkaError._ALL_BROKERS_DOWN]
                detail = causes[-1] if causes else "every broker is down"
                raise KafkaConnectionError(
                    f"Cannot reach {where}: {_redacted(detail, self._options)}"
                )

    def _retry(self, what: str, call: Any) -> Any:
        attempts = self._options.fetch_offset_num_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                self._reach()
                return call()
            except AuthenticationError:
                raise
            except Exception as exc:  # noqa: BLE001 - librdkafka raises KafkaException
                if attempt == attempts and isinstance(exc, AuthorizationError):
                    # Retried like any look-up (a broker may lag a new ACL briefly).
                    raise AuthorizationError(
                        exc.code,
                        exc.operation,
                        exc.resource_type,
                        exc.resource_name,
                        f"{exc.context}, failed after {attempts} attempt(s) "
                        f"(fetchOffset.numRetries={self._options.fetch_offset_num_retries})",
                        exc.hint,
                    ) from None
                if attempt == attempts:
                    raise KafkaTxnError(
                        f"Failed to {what} after {attempts} attempt(s) "
                        f"(fetchOffset.numRetries={self._options.fetch_offset_num_retries}): "
                        f"{_redacted_error(exc, self._options)}"
                    ) from None
                logger.warning(
                    "Failed to %s (attempt %d/%d): %s",
                    what,
                    attempt,
                    attempts,
                    _redacted_error(exc, self._options),
                )
                time.sleep(self._options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def resolve(
        self, spec: OffsetSpec, tps: set[TopicPartition], *, ending: bool
    ) -> PartitionOffsets:
        """Turn a starting/ending specification into offsets for ``tps``.

        Parameters
        ----------
        spec
            The parsed option.
        tps
            The partitions of the subscription.
        ending
            Whether this is an end bound (timestamps with no match then mean latest).

        Returns
        -------
        dict
            One offset per partition of ``tps``.
        """
        prefix = "ending" if ending else "starting"
        option = {
            GlobalTimestamp: f"{prefix}Timestamp",
            SpecificTimestamps: f"{prefix}OffsetsByTimestamp",
        }.get(type(spec), f"{prefix}Offsets")
        if spec is OffsetBound.EARLIEST:
            return self.earliest(tps)
        if spec is OffsetBound.LATEST:
            return self.latest(tps)
        if isinstance(spec, SpecificOffsets | SpecificTimestamps):
            given = set(spec.offsets if isinstance(spec, SpecificOffsets) else spec.timestamps)
            if given != tps:
                raise ConfigError(
                    f"Option '{option}': if it contains specific offsets, you must specify all "
                    "TopicPartitions. Use -1 for latest, -2 for earliest. "
                    f"Specified: {sorted(map(str, given))} Assigned: {sorted(map(str, tps))}"
                )
        if isinstance(spec, SpecificOffsets):
            earliest = self.earliest([tp for tp, o in spec.offsets.items() if o == -2])
            latest = self.latest([tp for tp, o in spec.offsets.items() if o == -1])
            return {
                tp: earliest[tp] if o == -2 else latest[tp] if o == -1 else o
                for tp, o in spec.offsets.items()
            }
        timestamps = (
            spec.timestamps
            if isinstance(spec, SpecificTimestamps)
            else dict.fromkeys(tps, spec.timestamp)
        )
        assert isinstance(spec, SpecificTimestamps | GlobalTimestamp)
        found = self.for_timestamps(timestamps)
        missing = [tp for tp, o in found.items() if o < 0]
        if missing:
            if not ending and not self._options.timestamp_strategy_latest:
                tp = missing[0]
                raise ConfigError(
                    f"Option '{option}': no offset matched from request of topic-partition "
                    f"{tp} and timestamp {timestamps[tp]} (set "
                    "'startingOffsetsByTimestampStrategy' to 'latest' to start at the latest "
                    "offset instead)"
                )
            found.update(self.latest(missing))
        return found


def _offset_spec() -> Any:
    """confluent-kafka's ``OffsetSpec`` (re-exported by ``confluent_kafka.admin`` at runtime)."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    return OffsetSpec


def _redacted_error(exc: BaseException, options: ReaderOptions) -> str:
    """``str(exc)`` with every secret value of the options blanked out."""
    return _redacted(str(exc), options)


def _redacted(text: str, options: ReaderOptions) -> str:
    """``text`` with every secret value of the options blanked out."""
    for key, value in options.kafka_params.items():
        if value and redact({key: value})[key] != value:
            text = text.replace(value, "*****")
    return text


class _DriverMixin:
    """What batch and stream readers share on the driver."""

    options: ReaderOptions
    _client: _OffsetClient | None

    def _offsets(self) -> _OffsetClient:
        if self._client is None:
            self._client = _OffsetClient(self.options)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _input_partitions(
        self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
    ) -> list[KafkaInputPartition | KafkaInputPartitions]:
        ranges: list[OffsetRange] = []
        for tp in sorted(end):
            s, e = start[tp], end[tp]
            if e < s:
                _report_data_loss(
                    self.options.fail_on_data_loss,
                    f"Partition {tp}'s offset was changed from {s} to {e}.",
                )
                continue
            ranges.append(OffsetRange(tp, s, e))
        split = split_ranges(
            ranges,
            min_partitions=self.options.min_partitions,
            max_records_per_partition=self.options.max_records_per_partition,
        )
        packed = pack_ranges(
            split,
            min_records_per_partition=self.options.min_records_per_partition,
            max_records_per_partition=self.options.max_records_per_partition,
            min_partitions=self.options.min_partitions,
        )
        tasks = [
            tuple(KafkaInputPartition(r.tp.topic, r.tp.partition, r.start, r.end) for r in task)
            for task in packed
        ]
        return [task[0] if len(task) == 1 else KafkaInputPartitions(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned task on an executor: its range or ranges (see :func:`read_range`)."""
        group_id = self._executor_group_id
        if isinstance(partition, KafkaInputPartitions):
            return (
                batch
                for one in partition.ranges
                for batch in read_range(self.options, one, group_id=group_id)
            )
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark plans one placeholder partition when there is nothing
        return read_range(self.options, partition, group_id=group_id)

    @property
    def _executor_group_id(self) -> str:
        return f"{self.options.group_id_prefix}-{self._query_uuid}-executor"

    _query_uuid: str


class KafkaBatchReader(_DriverMixin, DataSourceReader):
    """``spark.read.format("kafka_txn")``: one bounded read between two offset bounds.

    Parameters
    ----------
    options
        Validated options (``ending`` set).
    """

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._client = None
        self._query_uuid = uuid.uuid4().hex

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve both bounds (LSO-capped) and plan the tasks."""
        client = self._offsets()
        tps = client.topic_partitions(at_start=True)
        start = client.resolve(self.options.starting, tps, ending=False)
        assert self.options.ending is not None
        end = client.resolve(self.options.ending, tps, ending=True)
        latest = client.latest(tps)
        for tp in tps:
            if end[tp] > latest[tp]:
                logger.warning(
                    "Ending offset %d of %s is past the %s %d; reading up to it",
                    end[tp],
                    tp,
                    "last stable offset" if self.options.read_committed else "high watermark",
                    latest[tp],
                )
                end[tp] = latest[tp]
            if end[tp] < start[tp]:
                raise ConfigError(
                    f"Option 'endingOffsets': ending offset {end[tp]} of {tp} is before the "
                    f"starting offset {start[tp]}"
                )
        return self._input_partitions(start, end)


class _LsoStallMonitor:
    """Warns when a partition's LSO stays below its high watermark (read_committed).

    A transaction that stays open pins the LSO: read_committed readers see nothing of the
    partition past it until the transaction commits, aborts or times out. Python streaming
    sources cannot report custom metrics to Spark's progress, so the planner logs a
    warning, once per stall, naming the partition, the LSO, the high watermark and for how
    long the LSO has not advanced.

    Only partitions whose LSO did not advance since the previous trigger (and were not
    warned about yet) cost a look-up: one ListOffsets round for their high watermarks.

    Parameters
    ----------
    threshold_ms
        ``lsoStallWarnMs``: how long the LSO may stay below the high watermark unmoved.
    """

    def __init__(self, threshold_ms: int) -> None:
        self._threshold_s = threshold_ms / 1000
        self._last: PartitionOffsets = {}
        #: When each partition was last known not to be stalled (LSO moved or reached
        #: the high watermark).
        self._clear_at: dict[TopicPartition, float] = {}
        self._warned: set[TopicPartition] = set()

    def observe(self, lso: Mapping[TopicPartition, int], client: _OffsetClient) -> None:
        """Record the LSOs of one trigger; warn about partitions stalled too long."""
        now = time.monotonic()
        steady = [tp for tp in sorted(lso) if self._last.get(tp) == lso[tp]]
        for tp in set(self._clear_at) - set(steady):
            del self._clear_at[tp]
        self._warned &= set(steady)
        for tp in lso:
            self._clear_at.setdefault(tp, now)
        self._last = dict(lso)
        candidates = [tp for tp in steady if tp not in self._warned]
        if not candidates:
            return
        try:
            hwm = client.high_watermarks(candidates)
        except KafkaTxnError as exc:  # a warning's look-up never fails the query
            logger.info("Skipping the LSO stall check of this trigger: %s", exc)
            return
        for tp in candidates:
            if hwm.get(tp, lso[tp]) <= lso[tp]:
                self._clear_at[tp] = now
                continue
            stalled_s = now - self._clear_at[tp]
            if stalled_s >= self._threshold_s:
                self._warned.add(tp)
                logger.warning(
                    "Partition %s: the last stable offset (LSO) %d has not advanced for "
                    "%.1f s while the high watermark is %d (lsoStallWarnMs=%d). A transaction "
                    "left open holds back every read_committed reader: offsets from %d on "
                    "are read once it commits, aborts or times out "
                    "(transaction.timeout.ms of its producer).",
                    tp,
                    lso[tp],
                    stalled_s,
                    hwm[tp],
                    round(self._threshold_s * 1000),
                    lso[tp],
                )


class KafkaStreamReader(_DriverMixin, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka_txn")``: LSO-bounded micro-batches.

    Parameters
    ----------
    options
        Validated options (``ending`` is ``None``).
    """

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._client = None
        self._query_uuid = uuid.uuid4().hex
        self._latest: PartitionOffsets | None = None
        self._available_now: PartitionOffsets | None = None
        self._last_trigger_ms = 0.0
        self._initial: OffsetJson | None = None
        self._stalls = (
            _LsoStallMonitor(options.lso_stall_warn_ms)
            if options.read_committed and options.lso_stall_warn_ms > 0
            else None
        )

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> OffsetJson:  # noqa: N802 - Spark's API name
        """Resolve ``startingOffsets`` / ``startingOffsetsByTimestamp`` / ``startingTimestamp``.

        Resolved once per reader: Spark asks again when it runs the first micro-batch.
        """
        if self._initial is None:
            client = self._offsets()
            tps = client.topic_partitions(at_start=True)
            offsets = client.resolve(self.options.starting, tps, ending=False)
            logger.info("Initial offsets: %s", to_json_dict(offsets))
            self._initial = to_json_dict(offsets)
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - Spark's API name
        """``maxOffsetsPerTrigger`` → ReadMaxRows; ``minOffsetsPerTrigger`` → ReadMinRows."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's API name
        """Fix the end of an ``AvailableNow`` run at the current LSO / high watermark."""
        client = self._offsets()
        self._available_now = client.latest(client.topic_partitions())
        logger.info("Trigger.AvailableNow target: %s", to_json_dict(self._available_now))

    def latestOffset(  # noqa: N802 - Spark's API name
        self, start: OffsetJson, limit: ReadLimit
    ) -> OffsetJson:
        """End of the next micro-batch: the LSO (or high watermark), capped by ``limit``.

        The end of the query's first micro-batch (``start`` is what :meth:`initialOffset`
        returned) records that batch's start under :data:`~pyspark_kafka_txn.offsets.ORIGIN`,
        so that a re-run of the batch reads the same range (see :meth:`partitions`).
        """
        client = self._offsets()
        first = ORIGIN not in start and self._initial is not None and start == self._initial
        begin = from_json_dict(start)
        current = client.topic_partitions()
        for tp in sorted(set(begin) - current):
            _report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {tp} is gone (it was at offset {begin[tp]}).",
            )
            del begin[tp]
        if self._available_now is not None:
            latest = {tp: o for tp, o in self._available_now.items() if tp in current}
            # A target below the start (fixed before a "latest" start was resolved): nothing.
            latest.update({tp: max(o, begin.get(tp, o)) for tp, o in latest.items()})
            latest.update({tp: o for tp, o in begin.items() if tp not in latest})
        else:
            latest = client.latest(current)
            if self._stalls is not None:
                self._stalls.observe(latest, client)
        self._latest = dict(latest)
        new = [tp for tp in latest if tp not in begin]
        if new:
            earliest = client.earliest(new)
            logger.info("New partitions start at earliest: %s", to_json_dict(earliest))
            from_offsets = {**begin, **earliest}
        else:
            from_offsets = begin
        admitted = self._admit(limit, from_offsets, latest)
        end = begin if admitted is None else admitted
        if first:
            # Spark runs the first batch even without new data, and a re-run of it gets a
            # freshly resolved initial offset: keep the start this batch was planned with.
            return with_origin(end, from_offsets)
        if ORIGIN in start and end == from_json_dict(start):
            return start  # nothing new: the same offset, so Spark plans no empty batch
        return to_json_dict(end)

    def _admit(
        self,
        limit: ReadLimit,
        start: Mapping[TopicPartition, int],
        latest: PartitionOffsets,
    ) -> PartitionOffsets | None:
        """Apply minOffsetsPerTrigger/maxTriggerDelay and maxOffsetsPerTrigger like Spark.

        Returns ``None`` when the batch is delayed (not enough new offsets yet).
        """
        if isinstance(limit, ReadAllAvailable):
            return latest
        now_ms = time.time() * 1000
        minimum = self.options.min_offsets_per_trigger
        if minimum is not None and self._available_now is None:
            if now_ms - self._last_trigger_ms < self.options.max_trigger_delay_ms:
                backlog = sum(latest[tp] - start.get(tp, latest[tp]) for tp in latest)
                if backlog < minimum:
                    logger.debug("Delaying the batch: %d < minOffsetsPerTrigger", backlog)
                    return None
            self._last_trigger_ms = now_ms
        maximum = self.options.max_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            maximum = limit.max_rows
        if maximum is not None:
            return rate_limit(maximum, start, latest)
        return latest

    def reportLatestOffset(self) -> OffsetJson | None:  # noqa: N802 - Spark's API name
        """The uncapped LSO (or high watermark) seen by the last ``latestOffset`` call."""
        return None if self._latest is None else to_json_dict(self._latest)

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[InputPartition]:
        """One task per topic-partition range (split by minPartitions/maxRecordsPerPartition,
        packed by minRecordsPerPartition).

        When ``end`` records an origin (the first micro-batch), the batch starts there,
        not at ``start``: a re-run of a first batch whose commit was never written gets a
        freshly resolved initial offset as ``start``, which differs from the original one
        when new records arrived (``latest``), retention deleted records (``earliest``) or
        partitions were added.
        """
        if start == end:
            return []  # also Spark's probe on restart (setLatestSeenOffset)
        origin = origin_of(end)
        begin = from_json_dict(start)
        if origin is not None:
            if origin != begin:
                logger.info(
                    "First micro-batch planned from its recorded start %s (Spark gave %s)",
                    to_json_dict(origin),
                    to_json_dict(begin),
                )
            begin = origin
        until = from_json_dict(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self._offsets().earliest(new))
        return self._input_partitions(begin, until)

    def commit(self, end: OffsetJson) -> None:
        """Nothing to do: Spark's checkpoint owns the offsets; nothing is committed to Kafka."""

    def stop(self) -> None:
        """Drop the driver's Kafka handle."""
        self._client = None


# --------------------------------------------------------------------------- executor


#: Minimum rows per Arrow record batch yielded by ``read()``. Larger batches amortise the
#: per-batch cost of the Python worker → JVM hand-over (see docs/benchmarks.md, Reader).
ARROW_BATCH_ROWS = 10_000
#: Most messages taken from librdkafka per ``consume()`` call.
_CONSUME_MESSAGES = 10_000
_CONSUME_TIMEOUT_S = 0.2
#: Bounds of librdkafka's per-partition prefetch target (``queued.min.messages``), which
#: the reader sets to the size of its range unless ``kafka.queued.min.messages`` is given.
_PREFETCH_MIN, _PREFETCH_MAX = 1_000, 1_000_000
#: librdkafka settings of the executor's consumer unless given as ``kafka.*`` options.
#: With librdkafka's default ``fetch.queue.backoff.ms=1000``, a partition whose prefetch
#: queue holds ``queued.min.messages`` stops fetching for a second, which sets the read
#: rate of any range longer than that; 4 MiB per partition and fetch halves the number
#: of Fetch round trips.
_CONSUMER_DEFAULTS: dict[str, str | int | float | bool] = {
    "fetch.queue.backoff.ms": 0,
    "max.partition.fetch.bytes": 4_194_304,
}


def _consumer_config(
    options: ReaderOptions, partition: KafkaInputPartition, group_id: str
) -> dict[str, str | int | float | bool]:
    """The executor consumer's configuration: the options' plus throughput defaults."""
    config = options.consumer_config(group_id)
    for key, value in _CONSUMER_DEFAULTS.items():
        config.setdefault(key, value)
    size = partition.end - partition.start
    config.setdefault("queued.min.messages", min(max(size, _PREFETCH_MIN), _PREFETCH_MAX))
    return config


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (when enabled) for the duration.

    ``consume()`` creates one GC-tracked ``Message`` (and timestamp tuple) per record.
    Record objects that live through a collection are promoted, and every few
    ``consume()`` calls they trigger a full collection of the whole heap, which in a
    Spark Python worker (pyspark, pandas, pyarrow loaded) costs tens of milliseconds.
    The reader's objects form no cycles, so pausing the collector while a batch is
    consumed and converted frees nothing later than reference counting does; the
    collector runs again before the batch is handed to Spark.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _to_batch(msgs: list[Any], tp: TopicPartition, include_headers: bool) -> pa.RecordBatch:
    """One Arrow record batch of consumed records (all of ``tp``, in offset order)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    schema = arrow_schema(include_headers)
    n = len(msgs)
    # map() over the unbound C methods: no attribute lookup or bound method per row.
    timestamps = list(map(Message.timestamp, msgs))  # (type, milliseconds) pairs
    ts_types = list(map(itemgetter(0), timestamps))
    stamps = list(map(itemgetter(1), timestamps))
    if set(ts_types) <= _TIMESTAMP_TYPES:
        # librdkafka's 0/1/2 (none/create/log-append) are Kafka's -1/0/1.
        types = pc.subtract(pa.array(ts_types, pa.int32()), 1)
    else:
        types = pa.array([t - 1 if t in _TIMESTAMP_TYPES else -1 for t in ts_types], pa.int32())
    arrays = [
        pa.array(list(map(Message.key, msgs)), pa.binary()),
        pa.array(list(map(Message.value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(tp.topic, pa.string()), n),
        pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
        pa.array(list(map(Message.offset, msgs)), pa.int64()),
        pc.multiply(pa.array(stamps, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")),
        types,
    ]
    if include_headers:
        raw_headers: list[Any] = list(map(Message.headers, msgs))
        headers = [[{"key": k, "value": v} for k, v in h] if h else None for h in raw_headers]
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: librdkafka's timestamp types (none, create time, log-append time).
_TIMESTAMP_TYPES = frozenset({0, 1, 2})


def read_range(
    options: ReaderOptions, partition: KafkaInputPartition, *, group_id: str
) -> Iterator[pa.RecordBatch]:
    """Read ``[start, end)`` of one topic-partition as Arrow record batches.

    The range is finished when the consumer's position reaches ``end``: librdkafka advances
    the position past control markers and (under read_committed) aborted records, so
    ranges ending on a marker or holding no visible record complete without waiting.

    Parameters
    ----------
    options
        The validated reader options.
    partition
        The range to read.
    group_id
        Consumer group id (nothing is committed to it).

    Yields
    ------
    pyarrow.RecordBatch
        Rows of the built-in Kafka source's schema, in offset order.

    Raises
    ------
    DataLossError
        When the start offset was deleted or the partition vanished and
        ``failOnDataLoss`` is true.
    TimeoutError
        When the consumer made no progress for ``kafkaConsumer.pollTimeoutMs`` (and
        ``failOnDataLoss`` is true; otherwise the rest of the range is skipped).
    """
    if partition.end <= partition.start:
        return
    reader = _RangeReader(options, partition, group_id)
    try:
        yield from reader.batches()
    finally:
        reader.close()


class _RangeReader:
    """The consumer loop behind :func:`read_range`."""

    def __init__(self, options: ReaderOptions, partition: KafkaInputPartition, group_id: str):
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CkTopicPartition

        self.options = options
        self.tp = partition.tp
        self.start, self.end = partition.start, partition.end
        self.ck_tp = CkTopicPartition(self.tp.topic, self.tp.partition)
        self.consumer = Consumer(_consumer_config(options, partition, group_id))
        self.consumer.assign([CkTopicPartition(self.tp.topic, self.tp.partition, self.start)])
        self.position = self.start
        self.done = False
        self.group_refused = False

    def close(self) -> None:
        self.consumer.close()

    def batches(self) -> Iterator[pa.RecordBatch]:
        include_headers = self.options.include_headers
        pending: list[Any] = []
        last_progress = time.monotonic()
        while self.position < self.end and not self.done:
            # consume() waits until it has the number asked for or the timeout passes.
            # Asking for no more than the offsets left lets the last call return once
            # the range is complete (markers and aborted records are made up for by
            # the end-of-partition event or by records past the end).
            wanted = min(_CONSUME_MESSAGES, self.end - self.position)
            batch = None
            with _gc_paused():
                msgs = self.consumer.consume(wanted, _CONSUME_TIMEOUT_S)
                if msgs:
                    pending.extend(self._records(msgs))
                    msgs.clear()
                if len(pending) >= ARROW_BATCH_ROWS:
                    batch = _to_batch(pending, self.tp, include_headers)
                    pending = []
            if batch is not None:
                yield batch
            [now] = self.consumer.position([self.ck_tp])
            if now.offset > self.position:
                self.position = now.offset
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > self.options.poll_timeout_ms / 1000:
                self._on_stall()
        if pending:
            with _gc_paused():
                batch = _to_batch(pending, self.tp, include_headers)
            yield batch

    def _records(self, msgs: list[Any]) -> list[Any]:
        """The records of one ``consume()`` result that lie in ``[start, end)``.

        Error events are handled in order; when one makes the rest of the result stale
        (the consumer was re-assigned or the range is abandoned), the rest is dropped.
        """
        from confluent_kafka import Message

        if any(map(Message.error, msgs)):  # KafkaError is always truthy; None is not
            records = []
            for msg in msgs:
                err = msg.error()
                if err is None:
                    records.append(msg)
                elif self._on_error(err):
                    break
            msgs = records
            if not msgs:
                return msgs
        # One partition, in offset order: only the ends of the result can be out of range.
        if msgs[0].offset() < self.start or msgs[-1].offset() >= self.end:
            start, end = self.start, self.end
            msgs = [m for m in msgs if start <= m.offset() < end]
        return msgs

    def _on_stall(self) -> None:
        message = (
            f"Cannot fetch records of {self.tp} beyond offset {self.position} (reading "
            f"[{self.start}, {self.end})) in {self.options.poll_timeout_ms} milliseconds "
            "(kafkaConsumer.pollTimeoutMs)"
        )
        if self.options.fail_on_data_loss:
            raise TimeoutError(message)
        logger.warning("%s; skipping the rest of the range", message)
        self.done = True

    def _on_error(self, err: Any) -> bool:
        """Handle a consumer error event; True when the current poll result is stale."""
        from confluent_kafka import KafkaError
        from confluent_kafka import TopicPartition as CkTopicPartition

        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return False
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of group.id even in assign mode; the
            # reader never uses the group (explicit offsets, nothing committed), so it
            # needs no ACL on it.
            if not self.group_refused:
                self.group_refused = True
                logger.debug("Ignoring the consumer group's %s (group unused)", err.str())
            return False
        where = f"reading [{self.start}, {self.end}) of {self.tp}"
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise _not_authorized(self.options, code, "READ", self.tp.topic, f"Fetch, {where}")
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            low, _ = self.consumer.get_watermark_offsets(self.ck_tp, timeout=30, cached=False)
            _report_data_loss(
                self.options.fail_on_data_loss,
                f"Cannot fetch offset {self.position} of {self.tp}: the earliest available "
                f"offset is now {low} ({where}).",
            )
            if low >= self.end:
                self.done = True
            else:
                resume = max(low, self.position)
                self.consumer.assign([CkTopicPartition(self.tp.topic, self.tp.partition, resume)])
            return True
        if code in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_PARTITION,
            KafkaError._UNKNOWN_TOPIC,
        ):
            _report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {self.tp} vanished at offset {self.position} ({where}).",
            )
            self.done = True
            return True
        if err.fatal() or not err.retriable():
            raise KafkaTxnError(f"Kafka error {where}: {err.str()}")
        logger.warning("Transient Kafka error %s: %s", where, err.str())
        return False
