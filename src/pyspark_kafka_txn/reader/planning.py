"""Driver planning of the reader: metadata, ListOffsets, offset resolution, LSO stalls.

:class:`OffsetClient` is the driver's handle on the cluster: partition discovery and
ListOffsets through a confluent-kafka ``AdminClient`` **with the configured isolation
level**, so "latest" is the Last Stable Offset under ``read_committed`` and the high
watermark otherwise. A micro-batch therefore never ends past the LSO: records of a
transaction still open at planning time are left for a later micro-batch. It resolves the
``starting*`` / ``ending*`` options into offsets, retries look-ups
(``fetchOffset.numRetries``) and fails fast when the cluster cannot be reached or refuses
the credentials.

:func:`plan_tasks` splits and packs the offset ranges of a read into Spark tasks.

:class:`LsoStallMonitor` warns when an open transaction pins a partition's LSO
(``lsoStallWarnMs``).

Planning only: the reader classes (``reader/base.py``) own construction, pickling and
``read()``; this module imports nothing of the executor's. confluent-kafka is imported
inside the methods that use it, so importing this module stays cheap.
"""

from __future__ import annotations

import collections
import functools
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark_kafka_txn.backoff import Backoff, retry
from pyspark_kafka_txn.client.errors import AUTHORIZATION_CODES
from pyspark_kafka_txn.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigError,
    KafkaConnectionError,
    KafkaTxnError,
)
from pyspark_kafka_txn.offsets import OffsetRange, PartitionOffsets, pack_ranges, split_ranges
from pyspark_kafka_txn.options import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    OffsetSpec,
    ReaderOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    redact,
)
from pyspark_kafka_txn.options.kafka import librdkafka_client_config
from pyspark_kafka_txn.reader.common import (
    KafkaInputPartition,
    KafkaInputPartitions,
    not_authorized,
    report_data_loss,
)
from pyspark_kafka_txn.wire import TopicPartition

__all__ = ["LsoStallMonitor", "OffsetClient", "plan_tasks"]

logger = logging.getLogger(__name__)

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_ADMIN_TIMEOUT_S = 30.0
#: How often the driver looks at librdkafka's error events until the cluster first answers.
_PROBE_S = 0.5
#: First and largest pause while a look-up waits for leaders or partitions to be known.
_SETTLE_BACKOFF = Backoff(0.05, 1.0)


class _ErrorEvents:
    """librdkafka's ``error_cb`` (served by ``poll()``): keeps the events, newest last."""

    def __init__(self) -> None:
        self.seen: collections.deque[Any] = collections.deque(maxlen=64)
        #: Whether librdkafka reported every broker down.
        self.all_down = False

    def __call__(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        self.seen.append(err)
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True


class OffsetClient:
    """The driver's metadata and ListOffsets handle (created lazily, never pickled)."""

    def __init__(self, options: ReaderOptions) -> None:
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import AdminClient

        self._options = options
        #: librdkafka's error events (connection, TLS, SASL failures).
        self._events = _ErrorEvents()
        #: Whether the cluster has answered once (see :meth:`_reach`).
        self._reached = False
        config: dict[str, Any] = {
            **options.admin_config(),
            # A topic named in a metadata look-up must never be created by it.
            "allow.auto.create.topics": False,
            # Not a bound method of this client: the AdminClient must not hold its owner,
            # or the pair would outlive the read (a cycle) and librdkafka would go on
            # reconnecting, e.g. to a cluster that refused the TLS handshake.
            "error_cb": self._events,
        }
        try:
            self._admin = AdminClient(librdkafka_client_config(config))
        except Exception as exc:  # noqa: BLE001 - librdkafka reports bad settings here
            raise _setting_error(exc, options) from None
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

        def listing() -> Any:
            metadata = self._admin.list_topics(timeout=_ADMIN_TIMEOUT_S)
            unsettled = sorted(
                name
                for name, meta in metadata.topics.items()
                if meta.error is not None
                and meta.error.code() in _unsettled_codes()
                and self._covers(name)  # another application's new topic is not waited for
            )
            if unsettled:
                # Listed with an error such as LEADER_NOT_AVAILABLE: the topic exists, its
                # partitions are not known at this moment. Taken as "no partitions", a
                # subscribed topic would look deleted, and its read as data loss.
                raise _UnsettledError(f"topic(s) {', '.join(unsettled)} listed without partitions")
            return metadata

        metadata = self._retry("list topics", lambda: self._settled("Metadata", listing))
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
        return {TopicPartition(t, p) for t, ps in existing.items() if sub.covers(t) for p in ps}

    def _covers(self, topic: str) -> bool:
        """Whether the subscription reads ``topic`` (internal topics never)."""
        return topic not in _INTERNAL_TOPICS and self._options.subscription.covers(topic)

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
                raise not_authorized(self._options, error.code(), "DESCRIBE", topic, "Metadata")

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
        specs = {tp: spec.for_timestamp(ts) for tp, ts in timestamps.items()}
        return self._list(specs, lowest=-1)

    def _list(
        self, specs: Mapping[TopicPartition, Any], isolation: Any = None, lowest: int = 0
    ) -> PartitionOffsets:
        """ListOffsets for ``specs``, retried (``fetchOffset.*``) until every answer is an
        offset of at least ``lowest``.

        librdkafka answers -1001 (``OFFSET_INVALID``), without an error, for a partition
        whose request was lost (the connection dropped, e.g. its leader was killed): taken
        for an offset, it would end a micro-batch at -1001 in Spark's offset log, and every
        restart would replay that batch as data loss.
        """
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
                        raise not_authorized(
                            self._options, code, "DESCRIBE", ck.topic, "ListOffsets"
                        ) from None
                    raise
            invalid = {tp: o for tp, o in out.items() if o < lowest}
            if invalid:
                named = ", ".join(f"{tp}: {o}" for tp, o in sorted(invalid.items()))
                raise KafkaTxnError(f"ListOffsets gave no offset for {named}")
            return out

        result: PartitionOffsets = self._retry(
            "list offsets", lambda: self._settled("ListOffsets", call)
        )
        return result

    def commit_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` to the consumer group ``group`` (outside any generation, as
        ``kafka-consumer-groups --reset-offsets`` does).

        Raises
        ------
        KafkaTxnError
            Naming the group and what Kafka answered (e.g. the group has active members, or
            the principal lacks READ on the group or the topic).
        """
        if not offsets:
            return
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        from confluent_kafka import TopicPartition as CkTopicPartition

        request = ConsumerGroupTopicPartitions(
            group,
            [CkTopicPartition(tp.topic, tp.partition, o) for tp, o in sorted(offsets.items())],
        )
        try:
            futures = self._admin.alter_consumer_group_offsets(
                [request], request_timeout=_ADMIN_TIMEOUT_S
            )
            answer = futures[group].result()
        except KafkaException as exc:
            why = _redacted_error(exc, self._options)
            raise KafkaTxnError(f"committing offsets to group {group!r} failed: {why}") from None
        errors = {tp.error.name(): tp.error.code() for tp in answer.topic_partitions if tp.error}
        if errors:
            names = ", ".join(sorted(errors))
            if any(code in AUTHORIZATION_CODES for code in errors.values()):
                hint = f"the principal needs READ on group {group!r} and on the topics"
            elif {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS"} & set(errors):
                hint = "consumers are members of that group: name a group no consumer uses"
            else:
                hint = "Kafka's answer"
            raise KafkaTxnError(
                f"committing offsets to group {group!r} was refused ({names}): {hint}"
            )

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
            events = list(self._events.seen)
            for err in events:
                if err.code() == KafkaError._AUTHENTICATION or (
                    err.code() in (KafkaError._SSL, KafkaError._TRANSPORT)
                    and "SSL handshake failed" in err.str()
                ):
                    raise AuthenticationError(
                        f"Cannot connect to {where}: {_redacted(err.str(), self._options)}"
                    )
            if self._events.all_down or time.monotonic() > deadline:
                causes = [e.str() for e in events if e.code() != KafkaError._ALL_BROKERS_DOWN]
                detail = causes[-1] if causes else "every broker is down"
                raise KafkaConnectionError(
                    f"Cannot reach {where}: {_redacted(detail, self._options)}"
                )

    def _settled(self, what: str, call: Any) -> Any:
        """``call()``, asked again while the cluster's answer only says that a partition's
        leader or a topic's partitions are not known yet (a connection just dropped, an
        election, a topic being created), within the admin timeout, as Kafka's Java admin
        client waits within its API timeout, instead of spending one of the user's few
        ``fetchOffset.numRetries``."""
        deadline = time.monotonic() + _ADMIN_TIMEOUT_S

        def log(exc: Exception, pause: float) -> None:
            logger.info(
                "%s: %s; asking again in %.2f s", what, _redacted_error(exc, self._options), pause
            )

        return retry(call, _unsettled, _SETTLE_BACKOFF.pauses(deadline), log)

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
    from confluent_kafka.admin import OffsetSpec

    return OffsetSpec


#: The setting librdkafka names in its refusal of a configuration ("No such configuration
#: property: \"x\"", "Invalid value \"v\" for configuration property \"x\"").
_REFUSED_SETTING = re.compile(r'property:? "([^"]+)"')


class _UnsettledError(KafkaTxnError):
    """A topic listed with an error that only says its partitions are not known yet."""


@functools.cache
def _unsettled_codes() -> frozenset[int]:
    """librdkafka's and Kafka's answers that mean only "not known yet: ask again"."""
    from confluent_kafka import KafkaError

    return frozenset(
        {
            KafkaError._NOENT,  # ListOffsets: "Failed to query partition leaders: No leaders found"
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError._TRANSPORT,  # the connection dropped under the request: reconnecting
        }
    )


def _unsettled(exc: BaseException) -> bool:
    """Whether ``exc`` says only that a leader or a topic's partitions are not known yet."""
    if isinstance(exc, _UnsettledError):
        return True
    first: Any = exc.args[0] if exc.args else None
    code = first.code() if callable(getattr(first, "code", None)) else None
    return code in _unsettled_codes()


def _setting_error(exc: BaseException, options: ReaderOptions) -> ConfigError:
    """The error for a configuration librdkafka refused, naming the option (``kafka.`` and
    the setting librdkafka names) and carrying its reason, secrets blanked out."""
    reason = _redacted_error(exc, options)
    found = _REFUSED_SETTING.search(reason)
    which = f"Option 'kafka.{found.group(1)}'" if found else "A kafka.* option"
    return ConfigError(f"{which} is refused by librdkafka (which reads for kafka_txn): {reason}")


def _redacted_error(exc: BaseException, options: ReaderOptions) -> str:
    """``str(exc)`` with every secret value of the options blanked out."""
    return _redacted(str(exc), options)


def _redacted(text: str, options: ReaderOptions) -> str:
    """``text`` with every secret value of the options blanked out."""
    for key, value in options.kafka_params.items():
        if value and redact({key: value})[key] != value:
            text = text.replace(value, "*****")
    return text


def plan_tasks(
    options: ReaderOptions,
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
) -> list[KafkaInputPartition | KafkaInputPartitions]:
    """The tasks of one read: offset ranges split and packed by the options.

    Parameters
    ----------
    options
        ``minPartitions``, ``maxRecordsPerPartition``, ``minRecordsPerPartition`` and
        ``failOnDataLoss`` are used.
    start, end
        Resolved offsets per topic-partition (``end`` lists the partitions to read).

    Returns
    -------
    list
        One :class:`KafkaInputPartition` per task reading one range, one
        :class:`KafkaInputPartitions` per task reading several.

    Raises
    ------
    DataLossError
        When an end lies before its start (offsets reset) and ``failOnDataLoss`` is true.
    """
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        s, e = start[tp], end[tp]
        if e < s:
            report_data_loss(
                options.fail_on_data_loss,
                f"Partition {tp}'s offset was changed from {s} to {e}.",
            )
            continue
        ranges.append(OffsetRange(tp, s, e))
    split = split_ranges(
        ranges,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    packed = pack_ranges(
        split,
        min_records_per_partition=options.min_records_per_partition,
        max_records_per_partition=options.max_records_per_partition,
        min_partitions=options.min_partitions,
    )
    tasks = [
        tuple(KafkaInputPartition(r.tp.topic, r.tp.partition, r.start, r.end) for r in task)
        for task in packed
    ]
    return [task[0] if len(task) == 1 else KafkaInputPartitions(task) for task in tasks]


class LsoStallMonitor:
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

    def observe(self, lso: Mapping[TopicPartition, int], client: OffsetClient) -> None:
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
